//! `baton ralph` (crate baton-ralph) under its old path, `baton_lifecycle::ralph`, with the one
//! piece ralph cannot know on its own wired in: what `proceed` on the milestone gate does, which
//! needs the session build rules ([`crate::session::milestone::Planner`]). `decide` and
//! `advance` here take it; every other item is baton-ralph's own.

pub use baton_ralph::*;

pub mod verbs {
    //! baton-ralph's verbs, `decide` with the milestone gate planned by the build rules.

    pub use baton_ralph::verbs::*;

    pub mod decide {
        //! baton-ralph's `decide` verb with [`Planner`] as its milestone planner.

        use baton_ralph::verbs::decide as verb;
        pub use baton_ralph::verbs::decide::*;
        use baton_ralph::{Context, Output, error::Result};

        use crate::session::milestone::Planner;

        /// `decide`; `proceed` on the milestone gate plans the next milestone.
        pub fn run(ctx: &Context, session: Option<&str>, args: &DecideArgs) -> Result<Output> {
            verb::run(ctx, session, args, &Planner)
        }

        /// `advance`: the pending milestone gate settled with `proceed`.
        pub fn advance(
            ctx: &Context,
            session: Option<&str>,
            planning_mode: Option<String>,
            dry_run: bool,
            expect_revision: Option<u64>,
        ) -> Result<Output> {
            verb::advance(
                ctx,
                session,
                planning_mode,
                dry_run,
                expect_revision,
                &Planner,
            )
        }
    }
}

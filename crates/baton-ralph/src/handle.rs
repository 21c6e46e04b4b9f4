//! A session found once for a whole command: [`Handle`] is its id and folder, resolved by one
//! [`discovery::find`] at the command's entry; every later step re-reads the status document
//! through it ([`Handle::load`]) instead of looking the folder up again. [`Target`] is what a
//! verb is given: a session still to find (`--session`, or none), or one already found.

use super::context::Context;
use super::discovery::{self, Pick};
use super::error::{RalphError, Result};
use super::session::{STATUS_FILE, Session};
use std::path::{Path, PathBuf};

/// A found session folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handle {
    id: String,
    dir: PathBuf,
}

impl Handle {
    /// The handle of a loaded session.
    pub fn of(s: &Session) -> Handle {
        Handle {
            id: s.id.clone(),
            dir: s.dir.clone(),
        }
    }

    /// Finds the session `session` names, or the one `pick` selects, and loads it.
    pub fn open(ctx: &Context, session: Option<&str>, pick: Pick) -> Result<(Handle, Session)> {
        let s = discovery::find(ctx, session, pick)?.into_session()?;
        Ok((Handle::of(&s), s))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The status document as it is on disk now (what `--session <id>` would load: gone is
    /// SESSION_NOT_FOUND, damaged is E010).
    pub fn load(&self) -> Result<Session> {
        if !self.dir.join(STATUS_FILE).is_file() {
            return Err(RalphError::SessionNotFound(self.id.clone()));
        }
        discovery::load(&self.id, &self.dir).into_session()
    }
}

/// The session a verb works on.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// `--session <id>`, or `None` for the one a [`Pick`] selects.
    Find(Option<&'a str>),
    /// Found earlier in the same command.
    Found(&'a Handle),
}

impl<'a> From<Option<&'a str>> for Target<'a> {
    fn from(session: Option<&'a str>) -> Self {
        Target::Find(session)
    }
}

impl<'a> From<&'a Handle> for Target<'a> {
    fn from(handle: &'a Handle) -> Self {
        Target::Found(handle)
    }
}

impl Target<'_> {
    /// The session and its document: found now (`pick` when none is named), or re-read.
    pub fn open(self, ctx: &Context, pick: Pick) -> Result<(Handle, Session)> {
        match self {
            Target::Find(session) => Handle::open(ctx, session, pick),
            Target::Found(h) => Ok((h.clone(), h.load()?)),
        }
    }

    /// The session's document: found now (`pick` when none is named), or re-read.
    pub fn load(self, ctx: &Context, pick: Pick) -> Result<Session> {
        match self {
            Target::Find(session) => discovery::find(ctx, session, pick)?.into_session(),
            Target::Found(h) => h.load(),
        }
    }
}

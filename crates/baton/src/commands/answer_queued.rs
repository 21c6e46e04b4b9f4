//! `baton answer <UNIT> --db URL <TEXT>`: answers the question a queued run waits on, from any
//! machine with the queue's URL; the next `baton worker` to claim the unit goes on with the
//! answer (the work is `baton_worker::answer_unit`). Parsing and printing only.

use crate::args::run::AnswerArgs;
use crate::exit;
use crate::failure::Failure;
use baton_queue::QueueError;
use baton_worker::WorkerError;

fn failure(e: &WorkerError) -> Failure {
    match e {
        WorkerError::Queue(q) => crate::queue_db::failure(q),
        WorkerError::Refused { .. } => {
            Failure::new(e.code(), e.to_string(), exit::INVALID).hint(e.hint())
        }
        WorkerError::Other { .. } => Failure::new(e.code(), e.to_string(), exit::FAILURE),
    }
}

pub fn run(args: AnswerArgs) -> anyhow::Result<u8> {
    let as_json = args.model.json;
    let Ok(unit) = args.run.trim().parse::<i64>() else {
        let e = QueueError::InvalidInput(format!(
            "with --db the run is a unit's id (a number), not {:?}",
            args.run
        ));
        return Ok(crate::queue_db::failure(&e)
            .hint(Some(
                "`baton queue status --db URL` lists the units waiting for a person; without \
                 --db, `baton answer` answers a run of this machine"
                    .into(),
            ))
            .report(as_json));
    };
    let config =
        match crate::queue_db::db_config(args.db.as_deref(), args.db_env.as_deref(), "--db URL") {
            Ok(c) => c,
            Err(e) => return Ok(crate::queue_db::failure(&e).report(as_json)),
        };
    let text = args.answer_text();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let receipt = match runtime.block_on(baton_worker::answer_unit(&config, unit, &text)) {
        Ok(r) => r,
        Err(e) => return Ok(failure(&e).report(as_json)),
    };
    if as_json {
        crate::ui::print_json(&receipt)?;
    } else {
        let run = receipt
            .run_id
            .as_deref()
            .map(|r| format!(" (run {})", &r[..r.len().min(13)]))
            .unwrap_or_default();
        outln!("answered unit {unit}{run}: queued again; the next worker goes on with the answer");
    }
    Ok(exit::OK)
}

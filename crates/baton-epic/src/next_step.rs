//! What a person does next with an epic that stopped: the same words in `baton epic run` /
//! `resume` and on the epic board of `baton serve`.

use crate::board::{Board, Standing};
use crate::progress::FailureDetail;
use std::path::Path;

/// `text` as one shell word (quoted when it holds anything but plain path characters).
pub fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@,=~".contains(c))
        && !text.starts_with('~');
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// `baton epic resume --project <project>`.
pub fn resume_command(project: &Path) -> String {
    format!(
        "baton epic resume --project {}",
        shell_word(&project.display().to_string())
    )
}

/// After a phase failed: where the loop paused and the command that continues it.
pub fn after_failure(f: &FailureDetail, resume: &str) -> String {
    format!(
        "paused at {} of {}; fix the cause, then `{resume}`",
        f.phase, f.story_key
    )
}

/// What the board of `project` asks of a person next, when it stopped on a failure or was
/// interrupted.
pub fn of_board(board: &Board, project: &Path) -> Option<String> {
    let resume = resume_command(project);
    match (&board.last_failure, board.standing) {
        (Some(f), Standing::Paused) => Some(after_failure(f, &resume)),
        (_, Standing::Interrupted) => Some(format!(
            "no process drives the epic; the phase run is kept; continue with `{resume}`"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_a_space_is_one_quoted_word() {
        assert_eq!(
            resume_command(Path::new("/p/my project")),
            "baton epic resume --project '/p/my project'"
        );
        assert_eq!(shell_word("/p/x-1"), "/p/x-1");
    }
}

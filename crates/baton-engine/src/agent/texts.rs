//! What a menu item says to its agent: a script's text (ExecScript), a prompt or an inline
//! action (RunAction), with the item's data as extra context and the detail the user typed.

use crate::router::{ActionRef, DataRef, ExecRef, ResolvedCommand, RouteError};
use baton_package::Package;
use baton_package::model::Agent;
use std::fmt::Write as _;

/// The most of a script or data file put into a message.
const MAX_TEXT_BYTES: usize = 32 * 1024;

fn read(package: &Package, path: &str, what: &str) -> Result<String, RouteError> {
    let bytes = package.files().get(path).ok_or_else(|| RouteError {
        code: "DATA_LOAD_FAILED",
        message: format!(
            "{what} '{path}' is not a file of package '{}'",
            package.name()
        ),
        hint: Some("fix the path in the agent's menu (relative to the package root)".into()),
    })?;
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= MAX_TEXT_BYTES {
        return Ok(text.into_owned());
    }
    let mut cut = MAX_TEXT_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(format!(
        "{}\n[… cut at {MAX_TEXT_BYTES} bytes of {}]",
        &text[..cut],
        text.len()
    ))
}

/// `Extra context (from menuItem.data)`: the file's label, mount path and preview.
fn data_context(package: &Package, data: &DataRef) -> Result<String, RouteError> {
    let preview = read(package, &data.path, "data file")?;
    let mut s = String::from("Extra context (from menuItem.data):\n");
    let _ = writeln!(s, "- label: {}", data.path);
    let _ = writeln!(s, "- path: @pkg/{}", data.path);
    if let Some(kind) = data.parse_as {
        let _ = writeln!(s, "- parseAs: {kind}");
    }
    let _ = write!(s, "- preview:\n{preview}");
    Ok(s)
}

/// The message an ExecScript, RunAction or Chat command sends to the agent.
pub fn message(
    package: &Package,
    agent: &Agent,
    command: &ResolvedCommand,
) -> Result<String, RouteError> {
    let mut parts: Vec<String> = Vec::new();
    if let Some(ExecRef::Markdown { md_path }) = &command.exec_ref {
        let script = read(package, md_path, "script")?;
        parts.push(format!(
            "Run this script from @pkg/{md_path} with the user, step by step:\n\n{script}"
        ));
    }
    match &command.action_ref {
        Some(ActionRef::PromptId { id }) => {
            let prompt = agent
                .prompts
                .iter()
                .find(|p| p.id == *id)
                .ok_or_else(|| RouteError {
                    code: "UNKNOWN_PROMPT_ID",
                    message: format!("agent '{}' has no prompt '#{id}'", agent.id),
                    hint: None,
                })?;
            parts.push(prompt.content.clone());
        }
        Some(ActionRef::Inline { text }) => parts.push(text.clone()),
        Some(ActionRef::Builtin { .. }) | None => {}
    }
    if let Some(data) = &command.data_ref {
        parts.push(data_context(package, data)?);
    }
    if let Some(input) = command.input.as_deref().filter(|i| !i.trim().is_empty()) {
        parts.push(input.to_string());
    }
    Ok(parts.join("\n\n"))
}

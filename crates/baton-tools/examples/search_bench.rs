//! `search_bench DIR PATTERN [MAX_MATCHES]`: one `fs.search` over DIR mounted as @project, as
//! the ToolHost runs it. Used by bench/search.sh to compare with ripgrep.

use baton_tools::Mounts;
use baton_tools::mounts::{Mount, MountPath};
use baton_tools::search::{SearchRequest, search};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(pattern)) = (args.next(), args.next()) else {
        eprintln!("usage: search_bench DIR PATTERN [MAX_MATCHES]");
        std::process::exit(2);
    };
    let max_matches = args.next().and_then(|m| m.parse().ok()).unwrap_or(100_000);
    let state = std::env::temp_dir();
    let mounts = match Mounts::open(dir.as_ref(), dir.as_ref(), &state) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("cannot open {dir}: {e}");
            std::process::exit(1);
        }
    };
    let request = SearchRequest {
        root: MountPath {
            mount: Mount::Project,
            rel: String::new(),
        },
        pattern,
        globs: Vec::new(),
        before: 1,
        after: 1,
        max_matches,
    };
    match search(&mounts, &request) {
        Ok(result) => println!(
            "{} matches in {} files",
            result["stats"]["matchesFound"], result["stats"]["filesScanned"]
        ),
        Err(e) => {
            eprintln!("{}: {}", e.code, e.message);
            std::process::exit(1);
        }
    }
}

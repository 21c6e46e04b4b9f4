//! A throwaway PostgreSQL cluster on this machine, for trying the queue (`baton demo queue`):
//! `initdb` into a temporary folder, a server listening only on a Unix socket in that folder
//! (no TCP port, no password: nobody else can reach it), stopped and removed when the
//! [`LocalCluster`] is dropped — and by a watcher should this process be killed first.
//!
//! The server binaries are found in `$BATON_PG_BIN`, else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's layout), else `PATH`. `initdb` refuses to run as root,
//! so as root the cluster's programs run as `nobody` through `setpriv` (util-linux).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The cluster's superuser.
pub const LOCAL_USER: &str = "baton";

/// No PostgreSQL server binaries on this machine.
pub const QUEUE_POSTGRES_NOT_INSTALLED: &str = "QUEUE_POSTGRES_NOT_INSTALLED";
/// The binaries are there but the cluster could not be made or started.
pub const QUEUE_LOCAL_CLUSTER_FAILED: &str = "QUEUE_LOCAL_CLUSTER_FAILED";

/// Why no local cluster could be started.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct LocalClusterError {
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

fn failed(message: String) -> LocalClusterError {
    LocalClusterError {
        code: QUEUE_LOCAL_CLUSTER_FAILED,
        message,
        hint: None,
    }
}

/// A running throwaway cluster.
pub struct LocalCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    run_as: Option<(u32, u32)>,
    version: String,
    stopped: bool,
}

impl LocalCluster {
    /// Makes and starts a cluster; the error names what is missing (with the package to
    /// install) or what failed.
    pub fn start() -> Result<LocalCluster, LocalClusterError> {
        LocalCluster::start_with(find_bin_dir(std::env::var_os("BATON_PG_BIN")))
    }

    /// [`LocalCluster::start`] with the server programs in `bin` (`None`: not installed).
    fn start_with(bin: Option<PathBuf>) -> Result<LocalCluster, LocalClusterError> {
        let bin = bin.ok_or_else(|| LocalClusterError {
            code: QUEUE_POSTGRES_NOT_INSTALLED,
            message: "PostgreSQL's server programs (initdb, pg_ctl) are not installed on this \
                      machine"
                .into(),
            hint: Some(
                "install the `postgresql` package (Debian, Ubuntu: `sudo apt-get install \
                 postgresql`; the service need not run), or set BATON_PG_BIN to the folder \
                 holding initdb and pg_ctl"
                    .into(),
            ),
        })?;
        let dir = tempfile::Builder::new()
            .prefix("baton-demo-pg-")
            .tempdir()
            .map_err(|e| failed(format!("cannot make a temporary folder: {e}")))?;
        let root = fs::metadata(dir.path())
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
            .unwrap_or(false);
        let run_as = if root {
            let user = nobody().ok_or_else(|| {
                failed("running as root and there is no `nobody` user to run PostgreSQL as".into())
            })?;
            if which("setpriv").is_none() {
                return Err(failed(
                    "running as root and `setpriv` (util-linux) is missing to run PostgreSQL as \
                     `nobody`"
                        .into(),
                ));
            }
            std::os::unix::fs::chown(dir.path(), Some(user.0), Some(user.1))
                .map_err(|e| failed(format!("chown {}: {e}", dir.path().display())))?;
            Some(user)
        } else {
            None
        };
        let mut cluster = LocalCluster {
            dir,
            bin,
            run_as,
            version: String::new(),
            stopped: true,
        };
        let data = cluster.data_dir();
        let init = cluster.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                LOCAL_USER.as_ref(),
                "--auth-local=trust".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
                "-N".as_ref(),
            ],
        )?;
        if !init.status.success() {
            return Err(failed(format!("initdb failed: {}", output_text(&init))));
        }
        cluster.version = fs::read_to_string(data.join("PG_VERSION"))
            .map(|v| v.trim().to_string())
            .unwrap_or_default();
        let socket = cluster.dir.path().display().to_string();
        let settings = [
            format!("-k '{}'", socket.replace('\'', "'\\''")),
            "-c listen_addresses=''".to_string(),
            "-c fsync=off".to_string(),
            "-c synchronous_commit=off".to_string(),
            "-c full_page_writes=off".to_string(),
            "-c shared_buffers=16MB".to_string(),
        ]
        .join(" ");
        let log = cluster.dir.path().join("server.log");
        cluster.stopped = false;
        cluster.watch_for_orphaning();
        let start = cluster.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                settings.as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "start".as_ref(),
            ],
        )?;
        if !start.status.success() {
            let log_text = fs::read_to_string(&log).unwrap_or_default();
            return Err(failed(format!(
                "pg_ctl start failed: {}\nserver log:\n{log_text}",
                output_text(&start)
            )));
        }
        Ok(cluster)
    }

    /// The URL of the cluster's `postgres` database over its socket.
    pub fn url(&self) -> String {
        format!(
            "postgresql://{LOCAL_USER}@/postgres?host={}&port=5432",
            self.dir.path().display()
        )
    }

    /// The folder holding the cluster (removed when it is dropped).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// PostgreSQL's major version, e.g. `15`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The folder of the server programs used.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Stops the server at once (its data is thrown away with the folder).
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let data = self.data_dir();
        let _ = self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "30".as_ref(),
                "stop".as_ref(),
            ],
        );
    }

    /// Stops the cluster and removes its folder should this process die without dropping it
    /// (killed): a watcher in a session of its own checks every second that this process is
    /// alive and the folder still there.
    fn watch_for_orphaning(&self) {
        let q = |text: &str| format!("'{}'", text.replace('\'', "'\\''"));
        let data = q(&self.data_dir().display().to_string());
        let dir = q(&self.dir.path().display().to_string());
        let pg_ctl = q(&self.bin.join("pg_ctl").display().to_string());
        let run_as = match self.run_as {
            Some((uid, gid)) => format!("setpriv --reuid={uid} --regid={gid} --clear-groups -- "),
            None => String::new(),
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null && [ -d {dir} ]; do sleep 1; done; \
             if [ -d {data} ]; then {run_as}{pg_ctl} -D {data} -m immediate -w -t 30 stop; \
             rm -rf {dir}; fi",
            pid = std::process::id(),
        );
        let _ = Command::new("setsid")
            .args(["-f", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// Runs one of the cluster's programs, as `nobody` when we are root.
    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<Output, LocalClusterError> {
        let path = self.bin.join(program);
        let mut cmd = match self.run_as {
            Some((uid, gid)) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(&path);
                c
            }
            None => Command::new(&path),
        };
        cmd.args(args)
            .current_dir(self.dir.path())
            .env_remove("PGDATA")
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        cmd.output()
            .map_err(|e| failed(format!("cannot run {}: {e}", path.display())))
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop();
        // The temporary folder is removed when `dir` drops; the server's files in it belong to
        // `nobody` when we are root, which root may remove.
    }
}

/// `$BATON_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin` holding `initdb`, else the
/// folder of `initdb` on `PATH`.
fn find_bin_dir(configured: Option<std::ffi::OsString>) -> Option<PathBuf> {
    if let Some(dir) = configured {
        let dir = PathBuf::from(dir);
        return dir.join("initdb").is_file().then_some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let v = e.file_name().to_str()?.parse::<u32>().ok()?;
                    let bin = e.path().join("bin");
                    (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
                        .then_some((v, bin))
                })
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .or_else(|| which("initdb").and_then(|p| p.parent().map(Path::to_path_buf)))
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `nobody`'s uid and gid from /etc/passwd.
fn nobody() -> Option<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() > 3 && f[0] == "nobody" {
            Some((f[2].parse().ok()?, f[3].parse().ok()?))
        } else {
            None
        }
    })
}

fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .trim()
    .to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn without_the_server_programs_the_error_names_the_package() {
        // BATON_PG_BIN naming a folder without initdb: nothing to run, no other place tried.
        let empty = tempfile::tempdir().unwrap();
        assert!(find_bin_dir(Some(empty.path().into())).is_none());
        let e = LocalCluster::start_with(None).err().unwrap();
        assert_eq!(e.code, QUEUE_POSTGRES_NOT_INSTALLED);
        assert!(e.hint.unwrap().contains("`postgresql` package"));
    }
}

//! A throwaway PostgreSQL cluster for tests: `initdb` into a temporary directory, a server that
//! listens on a Unix socket in that directory and on 127.0.0.1 at a free port, stopped
//! (`pg_ctl stop -m immediate`) and removed when the [`PgServer`] is dropped.
//!
//! `initdb` refuses to run as root, so when the tests run as root (as on CI) the cluster's
//! programs run as `nobody` through `setpriv` (util-linux), and the directory is given to that
//! user. Connections over the socket are trusted; connections over TCP need the password
//! ([`PgServer::password`], SCRAM-SHA-256), so tests can exercise authentication.
//!
//! The binaries are found in `$BATON_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`
//! (Debian's layout), else `PATH`. A test calls [`postgres_or_skip`]: without a server it skips,
//! saying why, unless `BATON_REQUIRE_POSTGRES` is set (CI sets it), when it fails.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The superuser of every test cluster.
pub const USER: &str = "baton";

/// How a test cluster is configured.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `fsync` on (the server's default, for benchmarks that should count the disk) or off
    /// (tests: faster, and a test cluster never survives a crash anyway).
    pub fsync: bool,
    /// `shared_buffers`, e.g. "16MB" (tests) or "128MB" (the server's default).
    pub shared_buffers: String,
    /// `max_connections`.
    pub max_connections: u32,
    /// Extra `-c name=value` settings.
    pub settings: Vec<(String, String)>,
    /// TLS on TCP with a certificate for 127.0.0.1 and localhost, signed by a test CA made
    /// with the `openssl` command ([`PgServer::ca_cert`]).
    pub tls: bool,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            fsync: false,
            shared_buffers: "16MB".into(),
            max_connections: 60,
            settings: Vec::new(),
            tls: false,
        }
    }
}

/// A running throwaway cluster.
pub struct PgServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    run_as: Option<(u32, u32)>,
    port: u16,
    password: String,
    version: String,
}

impl PgServer {
    /// Starts a cluster with the test options.
    pub fn start() -> Result<PgServer, String> {
        PgServer::start_with(&PgOptions::default())
    }

    /// Starts a cluster; the error says what was missing or what failed.
    pub fn start_with(options: &PgOptions) -> Result<PgServer, String> {
        let bin = find_bin_dir().ok_or_else(|| {
            "no PostgreSQL server binaries (initdb, pg_ctl) found: install Debian's `postgresql` \
             package or set BATON_PG_BIN"
                .to_string()
        })?;
        let dir = tempfile::Builder::new()
            .prefix("baton-pg-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        // A directory we just made belongs to our effective user.
        let root = fs::metadata(dir.path())
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
            .unwrap_or(false);
        let run_as = if root {
            Some(nobody().ok_or_else(|| {
                "running as root and no `nobody` user to run the cluster as".to_string()
            })?)
        } else {
            None
        };
        if run_as.is_some() && which("setpriv").is_none() {
            return Err("running as root and `setpriv` (util-linux) is missing".into());
        }
        let password = format!("pw-{:016x}", random_u64());
        let pwfile = dir.path().join("pwfile");
        fs::write(&pwfile, format!("{password}\n")).map_err(|e| format!("pwfile: {e}"))?;
        fs::set_permissions(&pwfile, fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("pwfile: {e}"))?;
        if let Some((uid, gid)) = run_as {
            for path in [dir.path(), &pwfile] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .map_err(|e| format!("chown {}: {e}", path.display()))?;
            }
        }
        let mut server = PgServer {
            dir,
            bin,
            run_as,
            port: 0,
            password,
            version: String::new(),
        };
        let data = server.data_dir();
        let init = server.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                USER.as_ref(),
                format!("--pwfile={}", pwfile.display()).as_ref(),
                "--auth-local=trust".as_ref(),
                "--auth-host=scram-sha-256".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
                "-N".as_ref(),
            ],
        )?;
        if !init.status.success() {
            return Err(format!("initdb failed: {}", output_text(&init)));
        }
        server.version = fs::read_to_string(data.join("PG_VERSION"))
            .map(|v| v.trim().to_string())
            .unwrap_or_default();
        let mut tls_settings = Vec::new();
        if options.tls {
            server.make_certificates()?;
            let dir = server.dir.path().display().to_string();
            tls_settings = vec![
                "-c ssl=on".to_string(),
                format!("-c ssl_cert_file={}", quote(&format!("{dir}/server.crt"))),
                format!("-c ssl_key_file={}", quote(&format!("{dir}/server.key"))),
            ];
        }
        // A free port can be taken between the probe and the server's bind: try a few.
        let mut last = String::new();
        for _ in 0..4 {
            server.port = free_port().map_err(|e| format!("free port: {e}"))?;
            let mut settings = vec![
                format!("-k {}", quote(&server.dir.path().display().to_string())),
                format!("-p {}", server.port),
                "-c listen_addresses=127.0.0.1".to_string(),
                format!("-c fsync={}", if options.fsync { "on" } else { "off" }),
                format!("-c shared_buffers={}", options.shared_buffers),
                format!("-c max_connections={}", options.max_connections),
            ];
            if !options.fsync {
                settings.push("-c synchronous_commit=off".into());
                settings.push("-c full_page_writes=off".into());
            }
            settings.extend(tls_settings.iter().cloned());
            for (k, v) in &options.settings {
                settings.push(format!("-c {k}={}", quote(v)));
            }
            let log = server.dir.path().join("server.log");
            // pg_ctl -w polls the server's pid file until it says ready, bounded by -t.
            let start = server.run(
                "pg_ctl",
                &[
                    "-D".as_ref(),
                    data.as_os_str(),
                    "-l".as_ref(),
                    log.as_os_str(),
                    "-o".as_ref(),
                    settings.join(" ").as_ref(),
                    "-w".as_ref(),
                    "-t".as_ref(),
                    "60".as_ref(),
                    "start".as_ref(),
                ],
            )?;
            if start.status.success() {
                server.watch_for_orphaning();
                return server.ready().map(|()| server);
            }
            let log_text = fs::read_to_string(&log).unwrap_or_default();
            last = format!(
                "pg_ctl start failed: {}\nserver log:\n{log_text}",
                output_text(&start)
            );
            if !log_text.contains("could not bind") && !log_text.contains("in use") {
                break;
            }
        }
        Err(last)
    }

    /// Checks that the server accepts connections on both listeners (pg_isready, bounded).
    fn ready(&self) -> Result<(), String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        for host in [self.socket_dir().display().to_string(), "127.0.0.1".into()] {
            loop {
                let out = Command::new(self.bin.join("pg_isready"))
                    .args(["-q", "-h", &host, "-p", &self.port.to_string(), "-U", USER])
                    .args(["-d", "postgres", "-t", "5"])
                    .output()
                    .map_err(|e| format!("pg_isready: {e}"))?;
                if out.status.success() {
                    break;
                }
                if std::time::Instant::now() > deadline {
                    return Err(format!(
                        "the server did not answer on {host}: {}",
                        self.log()
                    ));
                }
                // Polling: pg_isready itself waits up to -t for the answer.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// The test CA's certificate (PEM) when started with `tls`.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A CA and a server certificate for 127.0.0.1 and localhost, made by `openssl`, in the
    /// cluster's directory and owned by the cluster's user (the key must be private to it).
    fn make_certificates(&self) -> Result<(), String> {
        let dir = self.dir.path();
        let ext = dir.join("server.ext");
        fs::write(
            &ext,
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .map_err(|e| format!("server.ext: {e}"))?;
        let steps: [&[&str]; 3] = [
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=baton test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "server.ext",
            ],
        ];
        for args in steps {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .map_err(|e| format!("openssl (needed for a TLS test cluster): {e}"))?;
            if !out.status.success() {
                return Err(format!("openssl {}: {}", args[0], output_text(&out)));
            }
        }
        let key = dir.join("server.key");
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("server.key: {e}"))?;
        if let Some((uid, gid)) = self.run_as {
            for name in ["server.key", "server.crt", "ca.crt"] {
                std::os::unix::fs::chown(dir.join(name), Some(uid), Some(gid))
                    .map_err(|e| format!("chown {name}: {e}"))?;
            }
        }
        Ok(())
    }

    /// The directory holding the Unix socket (`.s.PGSQL.<port>`).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The TCP port on 127.0.0.1 (also the socket's number).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's password (needed over TCP only).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The server's major version (`PG_VERSION`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// A URL to `dbname` over the Unix socket, no password needed.
    pub fn socket_url(&self, dbname: &str) -> String {
        format!(
            "postgresql://{USER}@/{dbname}?host={}&port={}",
            self.socket_dir().display(),
            self.port
        )
    }

    /// A URL to `dbname` over TCP without the password (it must come from elsewhere).
    pub fn tcp_url(&self, dbname: &str) -> String {
        format!("postgresql://{USER}@127.0.0.1:{}/{dbname}", self.port)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Runs a psql command over the socket (as the superuser) and returns its output.
    pub fn psql(&self, dbname: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .arg("-h")
            .arg(self.socket_dir())
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                "-d",
                dbname,
                "-c",
                sql,
            ])
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(output_text(&out))
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Stops the cluster and removes its folder when this process dies without dropping the
    /// server (a test killed, Ctrl-C on `cargo test`): a watcher in a session of its own checks
    /// every second that this process is alive and the cluster's folder still there. Without
    /// it, each killed test run would leave a postmaster behind.
    fn watch_for_orphaning(&self) {
        let quote_sh = |text: &str| format!("'{}'", text.replace('\'', "'\\''"));
        let data = quote_sh(&self.data_dir().display().to_string());
        let dir = quote_sh(&self.dir.path().display().to_string());
        let pg_ctl = quote_sh(&self.bin.join("pg_ctl").display().to_string());
        let run_as = match self.run_as {
            Some((uid, gid)) => format!("setpriv --reuid={uid} --regid={gid} --clear-groups -- "),
            None => String::new(),
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null && [ -d {data} ]; do sleep 1; done; \
             if [ -d {data} ]; then {run_as}{pg_ctl} -D {data} -m immediate -w -t 30 stop; \
             rm -rf {dir}; fi",
            pid = std::process::id(),
        );
        let _ = Command::new("setsid")
            .args(["-f", "sh", "-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }

    /// Runs one of the cluster's programs, as `nobody` when we are root.
    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<Output, String> {
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
            .env("LC_ALL", "C");
        cmd.output().map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
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
        // The temporary directory is removed when `dir` drops.
    }
}

/// Whether a missing server must fail the test (CI sets `BATON_REQUIRE_POSTGRES=1`).
pub fn postgres_required() -> bool {
    std::env::var("BATON_REQUIRE_POSTGRES").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A started cluster, or `None` after saying why the test skips. Panics when no cluster can be
/// started but `BATON_REQUIRE_POSTGRES` is set, so CI can never skip silently.
pub fn postgres_or_skip(test: &str) -> Option<PgServer> {
    postgres_or_skip_with(test, &PgOptions::default())
}

/// [`postgres_or_skip`] with options.
pub fn postgres_or_skip_with(test: &str, options: &PgOptions) -> Option<PgServer> {
    match PgServer::start_with(options) {
        Ok(server) => Some(server),
        Err(e) if postgres_required() => {
            panic!("{test}: BATON_REQUIRE_POSTGRES is set but no PostgreSQL could be started: {e}")
        }
        Err(e) => {
            eprintln!(
                "{test}: skipped: no PostgreSQL could be started ({e}); set \
                 BATON_REQUIRE_POSTGRES=1 to make this a failure"
            );
            None
        }
    }
}

fn find_bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("BATON_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
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
        (f.len() > 3 && f[0] == "nobody").then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Single-quotes a value for pg_ctl's `-o` (the server splits it like a shell).
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
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

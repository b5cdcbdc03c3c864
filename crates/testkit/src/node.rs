//! A RabbitMQ node of a test's own: its own name, ports and directories, started by the test
//! and stopped when dropped. A test may stop it, give it a TLS listener or cluster it; the
//! shared broker on 5672 is never touched.
//!
//! The node runs as the `rabbitmq` user (the Debian package's scripts switch to it), so its
//! directory is made readable and writable for that user. It starts in about 10 seconds.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the node offers besides plain AMQP.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeOptions {
    /// A TLS listener, with a certificate for `localhost` and `127.0.0.1` from a CA made for
    /// the node (see [`Node::ca_file`]).
    pub tls: bool,
}

/// A running RabbitMQ node; stopped and its directory removed when dropped.
#[derive(Debug)]
pub struct Node {
    name: String,
    dir: PathBuf,
    amqp_port: u16,
    tls_port: Option<u16>,
    dist_port: u16,
}

impl Node {
    /// Starts a node, or says why it cannot: `Err` when this machine has no RabbitMQ server
    /// to start (the caller gates on it as on an unreachable broker).
    pub async fn start(options: NodeOptions) -> Result<Self, String> {
        tokio::task::spawn_blocking(move || Self::start_blocking(options)).await.map_err(|e| e.to_string())?
    }

    fn start_blocking(options: NodeOptions) -> Result<Self, String> {
        if Command::new("rabbitmq-server").arg("--help").output().is_err() {
            return Err("no rabbitmq-server on this machine".to_owned());
        }
        let id = crate::unique_prefix();
        let dir = std::env::temp_dir().join(format!("airlock-node-{id}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let node = Self {
            name: format!("airlock-{id}@localhost"),
            amqp_port: free_port()?,
            tls_port: if options.tls { Some(free_port()?) } else { None },
            dist_port: free_port()?,
            dir,
        };
        node.write_config()?;
        run(Command::new("chown").args(["-R", "rabbitmq:rabbitmq"]).arg(&node.dir))?;
        run(node.env(&mut Command::new("rabbitmq-server")).arg("-detached"))?;
        // `wait` follows the pid file until the node has booted (or fails).
        let pid_file = node.dir.join("pid");
        run(node.ctl().arg("wait").arg(&pid_file).args(["--timeout", "90"]))?;
        Ok(node)
    }

    /// The node's plain AMQP URL (user guest).
    pub fn amqp_url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.amqp_port)
    }

    /// The node's `amqps://` URL, when it has a TLS listener.
    pub fn amqps_url(&self) -> Option<String> {
        self.tls_port.map(|port| format!("amqps://guest:guest@localhost:{port}/%2f"))
    }

    /// The PEM file of the CA that signed the TLS listener's certificate.
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.tls_port.map(|_| self.dir.join("ca.pem"))
    }

    /// The node's Erlang name, for `rabbitmqctl -n`.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn write_config(&self) -> Result<(), String> {
        let mut config = format!("listeners.tcp.local = 127.0.0.1:{}\n", self.amqp_port);
        if let Some(port) = self.tls_port {
            make_certificates(&self.dir)?;
            let dir = self.dir.display();
            config.push_str(&format!(
                "listeners.ssl.default = 127.0.0.1:{port}\n\
                 ssl_options.cacertfile = {dir}/ca.pem\n\
                 ssl_options.certfile = {dir}/server.pem\n\
                 ssl_options.keyfile = {dir}/server.key\n\
                 ssl_options.verify = verify_none\n\
                 ssl_options.fail_if_no_peer_cert = false\n"
            ));
        }
        write(&self.dir.join("rabbitmq.conf"), &config)?;
        // No plugins: the machine's would bind the shared node's management ports.
        write(&self.dir.join("enabled_plugins"), "[].\n")
    }

    /// `command` with the environment that makes RabbitMQ's scripts use this node.
    fn env<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        let dir = &self.dir;
        command
            .env("RABBITMQ_NODENAME", &self.name)
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_PID_FILE", dir.join("pid"))
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq.conf"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
    }

    /// `rabbitmqctl -n <this node>`.
    pub fn ctl(&self) -> Command {
        let mut command = Command::new("rabbitmqctl");
        command.args(["-n", &self.name]);
        command
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Err(e) = run(self.ctl().arg("stop")) {
            eprintln!("stopping test node {}: {e}", self.name);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port nothing listens on now (the OS's choice for port 0).
fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener.local_addr().map(|address| address.port()).map_err(|e| e.to_string())
}

/// A CA and a certificate it signed for `localhost` and `127.0.0.1`, made with `openssl`.
fn make_certificates(dir: &Path) -> Result<(), String> {
    let openssl = |args: &[&str]| run(Command::new("openssl").current_dir(dir).args(args));
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    openssl(
        &[
            &["req", "-x509"],
            &ec[..],
            &["-days", "2", "-subj", "/CN=Airlock test CA", "-keyout", "ca.key", "-out", "ca.pem"],
        ]
        .concat(),
    )?;
    openssl(&[&["req"], &ec[..], &["-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr"]].concat())?;
    write(&dir.join("san.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n")?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.cnf",
        "-out",
        "server.pem",
    ])
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

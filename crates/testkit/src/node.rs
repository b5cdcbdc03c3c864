//! A RabbitMQ node of a test's own: its own name, ports and directories, started by the test
//! and stopped when dropped. A test may stop and start it again, give it a TLS listener or
//! the management API, or make it one of a [`Cluster`](crate::cluster::Cluster); the shared
//! broker on 5672 is never touched.
//!
//! The node runs as the `rabbitmq` user (the Debian package's scripts switch to it), so its
//! directory is made readable and writable for that user. That user's Erlang cookie
//! (`/var/lib/rabbitmq/.erlang.cookie`) is the one every node started this way shares, and
//! the one `rabbitmqctl` (which switches to the same user) presents: the nodes of a cluster
//! and the tools reach each other with no cookie of the test's own. Names are
//! `airlock-<unique>@localhost`, so they never clash with the shared node's (`rabbit@<host>`)
//! in the one epmd of the machine. A node starts in about 10 seconds.
//!
//! Two faults besides stopping: [`Node::freeze`] (SIGSTOP to the node's runtime: every socket
//! to it stays open and silent, what a paused VM looks like to its clients and peers) and, in
//! a cluster, a partition ([`Cluster::partition`](crate::cluster::Cluster::partition)). For
//! the latter each node of a cluster makes its distribution connections from a loopback
//! address of its own ([`Node::dist_address`]), so packet filter rules can tell one node's
//! traffic with its peers from another's while every node listens on `localhost`.

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

/// A RabbitMQ node of a test's own; stopped and its directory removed when dropped.
#[derive(Debug)]
pub struct Node {
    spec: Spec,
    running: bool,
    frozen: bool,
}

/// What identifies a node and its files: enough to start, wait for and stop it from any
/// thread.
#[derive(Debug, Clone)]
struct Spec {
    name: String,
    dir: PathBuf,
    amqp_port: u16,
    tls_port: Option<u16>,
    management_port: Option<u16>,
    dist_port: u16,
}

impl Node {
    /// Starts a node, or says why it cannot: `Err` when this machine has no RabbitMQ server
    /// to start (the caller gates on it as on an unreachable broker).
    pub async fn start(options: NodeOptions) -> Result<Self, String> {
        blocking(move || {
            let mut node = Self::prepare(options, false)?;
            node.configure(&[])?;
            node.launch()?;
            node.spec.wait()?;
            Ok(node)
        })
        .await
    }

    /// Picks the node's name, ports and directory, with the management API (on a port of its
    /// own) if asked; starts nothing yet.
    pub(crate) fn prepare(options: NodeOptions, management: bool) -> Result<Self, String> {
        if !on_path("rabbitmq-server") {
            return Err("no rabbitmq-server on this machine".to_owned());
        }
        let id = crate::unique_prefix();
        let dir = std::env::temp_dir().join(format!("airlock-node-{id}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let spec = Spec {
            name: format!("airlock-{id}@localhost"),
            amqp_port: free_port()?,
            tls_port: if options.tls { Some(free_port()?) } else { None },
            management_port: if management { Some(free_port()?) } else { None },
            dist_port: free_port()?,
            dir,
        };
        Ok(Self { spec, running: false, frozen: false })
    }

    /// Writes the node's configuration: a node of its own, or with `peers` (the Erlang names
    /// of every node of a cluster, this one included) one that forms that cluster with them
    /// while booting.
    pub(crate) fn configure(&self, peers: &[String]) -> Result<(), String> {
        self.spec.write_config(peers)?;
        run(Command::new("chown").args(["-R", "rabbitmq:rabbitmq"]).arg(&self.spec.dir))
    }

    /// Starts the node's runtime in the background; [`Spec::wait`] follows its boot.
    pub(crate) fn launch(&mut self) -> Result<(), String> {
        run(self.spec.env(&mut Command::new("rabbitmq-server")).arg("-detached"))?;
        self.running = true;
        Ok(())
    }

    /// Waits until the node has booted (in a cluster: joined it).
    pub(crate) fn wait_blocking(&self) -> Result<(), String> {
        self.spec.wait()
    }

    /// Stops the node and waits until its runtime is gone; its data stays, for
    /// [`start_again`](Self::start_again). To its clients this is a node that went down.
    pub async fn stop(&mut self) -> Result<(), String> {
        if self.frozen {
            self.thaw().await?;
        }
        let spec = self.spec.clone();
        blocking(move || spec.stop()).await?;
        self.running = false;
        Ok(())
    }

    /// Starts a stopped node again on its data, names and ports, and waits until it has
    /// booted (in a cluster: rejoined it).
    pub async fn start_again(&mut self) -> Result<(), String> {
        if self.running {
            return Err(format!("{} is running", self.spec.name));
        }
        self.launch()?;
        let spec = self.spec.clone();
        blocking(move || spec.wait()).await
    }

    /// Whether the node was started and not stopped since.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Freezes the node's runtime (SIGSTOP): it stops answering anyone, and every TCP
    /// connection to it stays open (the kernel still acknowledges what it buffers), so
    /// clients and peers learn of it only by their own timeouts (heartbeats, the cluster's
    /// `net_ticktime`). [`thaw`](Self::thaw) lets it run on; a frozen node is thawed before
    /// it is stopped or dropped.
    pub async fn freeze(&mut self) -> Result<(), String> {
        self.signal("-STOP").await?;
        self.frozen = true;
        Ok(())
    }

    /// Lets a frozen node run on (SIGCONT).
    pub async fn thaw(&mut self) -> Result<(), String> {
        self.signal("-CONT").await?;
        self.frozen = false;
        Ok(())
    }

    /// Whether the node is frozen.
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    async fn signal(&self, signal: &'static str) -> Result<(), String> {
        let pid = self.spec.pid().ok_or_else(|| format!("{} has no pid file", self.spec.name))?;
        blocking(move || run(Command::new("kill").args([signal, &pid]))).await
    }

    /// The port of the node's Erlang distribution listener, which its peers and `rabbitmqctl`
    /// connect to.
    pub fn dist_port(&self) -> u16 {
        self.spec.dist_port
    }

    /// The loopback address the node's own distribution connections to its peers come from:
    /// `127.1.<the dist port's two bytes>`, so no two nodes of the machine share one and
    /// none is `127.0.0.1`, which every other client (and the shared node) uses.
    pub fn dist_address(&self) -> std::net::Ipv4Addr {
        let [high, low] = self.spec.dist_port.to_be_bytes();
        std::net::Ipv4Addr::new(127, 1, high, low)
    }

    /// The node's plain AMQP URL (user guest).
    pub fn amqp_url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.spec.amqp_port)
    }

    /// The base URL of the node's management API (user guest), when it has one, e.g.
    /// `http://127.0.0.1:40123`.
    pub fn management_url(&self) -> Option<String> {
        self.spec.management_port.map(|port| format!("http://127.0.0.1:{port}"))
    }

    /// The node's `amqps://` URL, when it has a TLS listener.
    pub fn amqps_url(&self) -> Option<String> {
        self.spec.tls_port.map(|port| format!("amqps://guest:guest@localhost:{port}/%2f"))
    }

    /// The PEM file of the CA that signed the TLS listener's certificate.
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.spec.tls_port.map(|_| self.spec.dir.join("ca.pem"))
    }

    /// The node's Erlang name, for `rabbitmqctl -n`.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// `rabbitmqctl -n <this node>`.
    pub fn ctl(&self) -> Command {
        self.spec.ctl()
    }

    /// The node's directory (data, logs, configuration), removed when it is dropped.
    pub fn dir(&self) -> &Path {
        &self.spec.dir
    }

    /// Stops the node if it runs, without an async runtime; for drops.
    pub(crate) fn stop_blocking(&mut self) {
        self.thaw_blocking();
        if self.running {
            if let Err(e) = self.spec.stop() {
                eprintln!("stopping test node {}: {e}", self.spec.name);
            }
            self.running = false;
        }
    }

    /// Ends the node if it runs, at once: SIGKILL to the runtime the node's pid file names
    /// (an orderly stop when there is none). For drops, where the node's data goes anyway.
    pub(crate) fn end_blocking(&mut self) {
        if !self.running {
            return;
        }
        // SIGKILL ends a stopped process too, but its pid file would name a process that
        // never exits for `stop_blocking`'s wait if the kill failed.
        self.thaw_blocking();
        match self.spec.pid() {
            Some(pid) => {
                if let Err(e) = run(Command::new("kill").args(["-KILL", &pid])) {
                    eprintln!("ending test node {}: {e}", self.spec.name);
                }
                self.running = false;
            }
            None => self.stop_blocking(),
        }
    }
}

// === impl Node (drops) ===

impl Node {
    /// Thaws a frozen node without an async runtime: a stopped runtime would hold SIGTERM
    /// until it runs again.
    fn thaw_blocking(&mut self) {
        if !self.frozen {
            return;
        }
        if let Some(pid) = self.spec.pid()
            && let Err(e) = run(Command::new("kill").args(["-CONT", &pid]))
        {
            eprintln!("thawing test node {}: {e}", self.spec.name);
        }
        self.frozen = false;
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_blocking();
        let _ = std::fs::remove_dir_all(&self.spec.dir);
    }
}

// === impl Spec ===

impl Spec {
    fn write_config(&self, peers: &[String]) -> Result<(), String> {
        let mut config = format!("listeners.tcp.local = 127.0.0.1:{}\n", self.amqp_port);
        if let Some(port) = self.management_port {
            config.push_str(&format!("management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = {port}\n"));
        }
        if !peers.is_empty() {
            // Every node lists every node: whichever boots first forms the cluster and the
            // others join it while booting (serialised by a lock the backend takes).
            config.push_str("cluster_formation.peer_discovery_backend = classic_config\n");
            // A node cut off from the majority pauses: it closes its clients' connections and
            // stops listening until it sees the majority again, so the fleet's roles move to
            // the majority's nodes, where the quorum queues' leaders are. The default
            // (`ignore`) leaves the minority's listeners up: its clients stay on a node where
            // no quorum queue can commit, their publishes unconfirmed, until their deadlines.
            // The fleet's queues are quorum queues, which stay consistent on their own; what
            // the setting decides is where clients may stay.
            config.push_str("cluster_partition_handling = pause_minority\n");
            // Peers are declared down after 10 s of silence (between 7.5 and 12.5 s) rather
            // than the default 60: a partition or a frozen node is seen within a test's time.
            config.push_str("net_ticktime = 10\n");
            for (i, peer) in peers.iter().enumerate() {
                config.push_str(&format!("cluster_formation.classic_config.nodes.{} = {peer}\n", i + 1));
            }
        }
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
        // Only the plugins asked for: the machine's list would bind the shared node's
        // management ports.
        let plugins = if self.management_port.is_some() { "[rabbitmq_management].\n" } else { "[].\n" };
        write(&self.dir.join("enabled_plugins"), plugins)
    }

    /// Waits until the node has booted: `wait` follows the pid file until then (or a failure).
    fn wait(&self) -> Result<(), String> {
        let pid_file = self.dir.join("pid");
        run(self.ctl().arg("wait").arg(&pid_file).args(["--timeout", "90"])).map_err(|e| {
            // The directory goes with the node: the reason has to travel in the error.
            format!("{e}\nthe end of {}'s log:\n{}", self.name, self.log_tail(40))
        })
    }

    /// The last `lines` lines of the node's log.
    fn log_tail(&self, lines: usize) -> String {
        let log = self.dir.join("log").join(format!("{}.log", self.name));
        let text = std::fs::read_to_string(&log).unwrap_or_else(|e| format!("({}: {e})", log.display()));
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops the node as a service manager does, with SIGTERM to its runtime (RabbitMQ shuts
    /// down in order: listeners closed, clients disconnected, queues stopped), and returns
    /// once the runtime has exited, so the node can be started again at once. Twice as fast
    /// as `rabbitmqctl stop`, which does the same after starting a runtime of its own.
    #[expect(clippy::disallowed_methods, reason = "runs on a blocking thread or in a drop, never on the runtime")]
    fn stop(&self) -> Result<(), String> {
        let Some(pid) = self.pid() else {
            return run(self.ctl().arg("stop").arg(self.dir.join("pid")));
        };
        run(Command::new("kill").args(["-TERM", &pid]))?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        while Command::new("kill").args(["-0", &pid]).output().is_ok_and(|probe| probe.status.success()) {
            if std::time::Instant::now() > deadline {
                return Err(format!("{} did not stop within 90 s of SIGTERM", self.name));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Ok(())
    }

    /// The OS pid of the node's runtime, from its pid file.
    fn pid(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.dir.join("pid")).ok()?;
        let pid = text.trim();
        pid.parse::<u32>().is_ok().then(|| pid.to_owned())
    }

    /// `command` with the environment that makes RabbitMQ's scripts use this node.
    fn env<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        let dir = &self.dir;
        let [high, low] = self.dist_port.to_be_bytes();
        command
            // Distribution connections to peers leave from the node's own loopback address
            // (see `Node::dist_address`); `rabbitmqctl` runs with arguments of its own.
            .env(
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
                format!("-kernel inet_dist_connect_options [{{ip,{{127,1,{high},{low}}}}}]"),
            )
            .env("RABBITMQ_NODENAME", &self.name)
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_PID_FILE", dir.join("pid"))
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq.conf"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
    }

    /// `rabbitmqctl -n <this node>`.
    fn ctl(&self) -> Command {
        let mut command = Command::new("rabbitmqctl");
        command.args(["-n", &self.name]);
        command
    }
}

/// Runs blocking node work (starting, waiting, stopping) off the async runtime.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> Result<T, String> + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(work).await.map_err(|e| e.to_string())?
}

/// Whether `program` is on `PATH` (looked up, not run: the server's scripts take seconds to
/// answer even `--help`).
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
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

//! Least-privilege broker users for a test: the users of a roles file, defined by `airlock
//! topology definitions` and loaded into a vhost of their own on the test broker, each
//! signing in with [`PASSWORD`].

use airlock_testkit::{amqp_url, rabbitmqctl};
use airlock_transport::{AmqpOptions, AmqpTransport};

use crate::airlock_bin;

/// Every loaded user's password.
pub const PASSWORD: &str = "s3cret-for-tests";

/// The test broker's `host:port`, from `AIRLOCK_AMQP_URL`.
pub fn authority() -> String {
    let url = amqp_url();
    let after_scheme = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
    let host = after_scheme.rsplit_once('@').map_or(after_scheme, |(_, host)| host);
    host.split('/').next().unwrap_or(host).to_owned()
}

/// A vhost and its users, loaded from a roles file; deleted when dropped.
pub struct Loaded {
    /// The vhost, named as the test's unique id.
    pub vhost: String,
    users: Vec<String>,
}

impl Loaded {
    /// Loads the fleet `prefix` into the vhost `id` with `users`: each a user's name and the
    /// rest of its roles-file entry (`role: runner`, `role: reviewer, instance: rv, pools:
    /// [ops]`, …).
    pub async fn load(id: &str, prefix: &str, users: &[(&str, &str)]) -> Loaded {
        let mut roles = format!("prefix: {prefix}\nvhost: {id}\nusers:\n");
        for (name, entry) in users {
            roles.push_str(&format!("  - {{name: {name}, {entry}, password: {PASSWORD}}}\n"));
        }
        let dir = std::env::temp_dir().join(format!("{id}-roles"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("roles.yaml"), roles).unwrap();
        let output = std::process::Command::new(airlock_bin())
            .args(["topology", "definitions", "--roles"])
            .arg(dir.join("roles.yaml"))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        std::fs::write(dir.join("definitions.json"), &output.stdout).unwrap();
        // Deleted from here on, whatever happens next.
        let loaded = Loaded { vhost: id.to_owned(), users: users.iter().map(|(name, _)| (*name).to_owned()).collect() };
        rabbitmqctl(&["import_definitions", &dir.join("definitions.json").display().to_string()]).await;
        let _ = std::fs::remove_dir_all(&dir);
        loaded
    }

    /// The AMQP URL of `user` on the vhost.
    pub fn url(&self, user: &str) -> String {
        format!("amqp://{user}:{PASSWORD}@{}/{}", authority(), self.vhost)
    }

    /// A transport signed in as `user`.
    pub async fn connect_as(&self, user: &str) -> AmqpTransport {
        AmqpTransport::connect_with(AmqpOptions::new(self.url(user)).with_connection_name(format!("roles {user}")))
            .await
            .unwrap_or_else(|e| panic!("{user} signs in: {e}"))
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        let _ = std::process::Command::new("rabbitmqctl").args(["delete_vhost", &self.vhost]).output();
        for user in &self.users {
            let _ = std::process::Command::new("rabbitmqctl").args(["delete_user", user]).output();
        }
    }
}

//! Broker users by role, each with the least the fleet's topology lets it do, as RabbitMQ
//! definitions (`rabbitmqctl import_definitions`, or `load_definitions` at boot).
//!
//! Regular permissions say which queues and exchanges a user may configure (declare, delete),
//! write (publish to; bind a queue) and read (consume; bind from an exchange). Runners, steps
//! and reviewers publish only to exchanges that reach one queue each (`<p>.ask`, `<p>.answer`),
//! so no routing key or `CC` header of theirs can reach another queue. Topic permissions on
//! `<p>.route`, which only the workers publish to, say which keys each user may bind:
//!
//! | role | publishes to | reads | declares |
//! |---|---|---|---|
//! | runner `U` | `<p>.ask`; cancels | `<p>.reply.U.*` (bound as `reply.U.*`) | its reply queues |
//! | worker | `<p>.route` (`step.*`, `human.*`, `reply.*`, decisions); dead letters; `<p>.control` | every queue of the fleet | the whole fleet |
//! | step `S` | `<p>.answer`; `<p>.scores.S`, `<p>.samples.S`, `<p>.limiter.*` | `<p>.step.S` and those logs | those queues |
//! | reviewer (`--id I`, pools) | `<p>.answer`; `<p>.route` (`reply.*`: a call waits for a person); `<p>.control` | `<p>.human.<pool>`, `<p>.reply.I` (cancels), `<p>.control` | those queues |
//! | auditor | — | `<p>.audit`, bound as `approval.*` and `review.*` | that queue |
//! | operator | `<p>.control` (`airlock run`) | `<p>.control` | that log |
//!
//! So a step cannot publish requests or read human tasks, nor throw a switch on a run or mark
//! an incident (the control log `<p>.control`), a runner cannot read another runner's replies,
//! answer a step or touch the control log, and nobody but a worker or a reviewer service (whose
//! `Progress` replies are unproved and settle nothing) can reach a runner's reply queue. Nothing is granted on the default exchange. A runner's id must start with its
//! broker user and a dot (`U.<anything>`): its reply queue is `<p>.reply.U.<anything>`.
//! Queues dead-letter to `<p>.dlx`, so whoever declares one may write there.

use airlock_transport::topology::{
    ANSWER, ASK, AUDIT, CANCELS, CONTROL, DECISION_KINDS, DEFAULT_PREFIX, DLX, HUMAN, LIMITER, REPLY, REQUESTS,
    RESULTS, ROUTE, SAMPLES, SCORES, STEP,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use regex::escape as regex_escape;
use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

/// A roles file: the fleet, its vhost, and its users.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolesFile {
    /// The fleet's prefix.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// The vhost the fleet runs in.
    #[serde(default = "default_vhost")]
    pub vhost: String,
    /// The users.
    pub users: Vec<RoleUser>,
}

/// One broker user and what it is for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleUser {
    /// The user's name.
    pub name: String,
    /// `runner`, `worker`, `step:<name>`, `reviewer`, `auditor` or `operator`.
    pub role: String,
    /// Its password; without one the user cannot sign in with a password (set one later with
    /// `rabbitmqctl change_password`, or use another mechanism).
    #[serde(default)]
    pub password: Option<String>,
    /// For a reviewer: the service's `--id` (its queue of cancels, `<p>.reply.<id>`).
    #[serde(default)]
    pub instance: Option<String>,
    /// For a reviewer: the pools it serves.
    #[serde(default)]
    pub pools: Vec<String>,
}

/// A role, read from [`RoleUser::role`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Asks for decisions.
    Runner,
    /// Runs chains.
    Worker,
    /// Answers one external step (a plugin or a model monitor).
    Step(String),
    /// A reviewer service: its cancels queue and its pools.
    Reviewer {
        /// The service's `--id`.
        instance: String,
        /// The pools it serves.
        pools: Vec<String>,
    },
    /// Writes the decision log.
    Auditor,
    /// Throws switches on runs (`airlock run`).
    Operator,
}

/// RabbitMQ definitions: users, the vhost, and each user's permissions.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Definitions {
    /// The users.
    pub users: Vec<User>,
    /// The vhost.
    pub vhosts: Vec<Vhost>,
    /// Permissions on queues and exchanges.
    pub permissions: Vec<Permission>,
    /// Permissions on routing keys of `<p>.route`.
    pub topic_permissions: Vec<TopicPermission>,
}

/// A user of the definitions.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: String,
    /// Its salted SHA-256 password hash, base64; empty for no password.
    pub password_hash: String,
    /// How the hash was made.
    pub hashing_algorithm: &'static str,
    /// No tags: no management access.
    pub tags: Vec<String>,
}

/// A vhost of the definitions.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Vhost {
    /// Its name.
    pub name: String,
}

/// What a user may configure, write and read (regular expressions on names).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Permission {
    /// The user.
    pub user: String,
    /// The vhost.
    pub vhost: String,
    /// Names it may declare and delete.
    pub configure: String,
    /// Names it may publish to and bind queues of.
    pub write: String,
    /// Names it may consume from and bind from.
    pub read: String,
}

/// Which routing keys of a topic exchange a user may publish (write) and bind (read).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TopicPermission {
    /// The user.
    pub user: String,
    /// The vhost.
    pub vhost: String,
    /// The exchange.
    pub exchange: String,
    /// Keys it may publish with.
    pub write: String,
    /// Keys it may bind with.
    pub read: String,
}

/// Why a roles file cannot be turned into definitions.
#[derive(Debug, thiserror::Error)]
pub enum RolesError {
    /// A user's role or its settings are wrong.
    #[error("user '{user}': {problem}")]
    Invalid {
        /// The user.
        user: String,
        /// What is wrong.
        problem: String,
    },
    /// No randomness for a password's salt.
    #[error("no randomness available for a password salt")]
    Random,
}

const NOTHING: &str = "^$";

impl RoleUser {
    /// The user's role, checked.
    pub fn role(&self) -> Result<Role, RolesError> {
        let invalid = |problem: &str| RolesError::Invalid { user: self.name.clone(), problem: problem.to_owned() };
        let role = match self.role.as_str() {
            "runner" => Role::Runner,
            "worker" => Role::Worker,
            "auditor" => Role::Auditor,
            "operator" => Role::Operator,
            "reviewer" => {
                let instance = self.instance.clone().ok_or_else(|| invalid("a reviewer needs its 'instance'"))?;
                if self.pools.is_empty() {
                    return Err(invalid("a reviewer needs its 'pools'"));
                }
                Role::Reviewer { instance, pools: self.pools.clone() }
            }
            other => match other.strip_prefix("step:") {
                Some(step) if !step.is_empty() => Role::Step(step.to_owned()),
                _ => {
                    return Err(invalid(&format!(
                        "unknown role '{other}' (runner, worker, step:<name>, reviewer, auditor, operator)"
                    )));
                }
            },
        };
        let settings_of_a_reviewer = self.instance.is_some() || !self.pools.is_empty();
        if settings_of_a_reviewer && !matches!(role, Role::Reviewer { .. }) {
            return Err(invalid("only a reviewer has 'instance' and 'pools'"));
        }
        Ok(role)
    }
}

impl RolesFile {
    /// The definitions of every user of the file.
    pub fn definitions(&self) -> Result<Definitions, RolesError> {
        let mut definitions = Definitions {
            users: Vec::new(),
            vhosts: vec![Vhost { name: self.vhost.clone() }],
            permissions: Vec::new(),
            topic_permissions: Vec::new(),
        };
        for user in &self.users {
            let (permission, topic) = grants(&self.prefix, &self.vhost, &user.name, &user.role()?);
            let password_hash = user.password.as_deref().map(password_hash).transpose()?.unwrap_or_default();
            definitions.users.push(User {
                name: user.name.clone(),
                password_hash,
                hashing_algorithm: "rabbit_password_hashing_sha256",
                tags: Vec::new(),
            });
            definitions.permissions.push(permission);
            definitions.topic_permissions.push(topic);
        }
        Ok(definitions)
    }
}

/// What `user`, in `role`, may do in the fleet of `prefix` on `vhost`: its permission and its
/// topic permission on `<p>.route`.
pub fn grants(prefix: &str, vhost: &str, user: &str, role: &Role) -> (Permission, TopicPermission) {
    let p = regex_escape(prefix);
    let name = |suffix: &str| format!("{p}\\.{suffix}");
    let any_of = |names: &[String]| format!("^({})$", names.join("|"));
    let route = name(ROUTE);
    let (dlx, cancels, audit, ask, answer) = (name(DLX), name(CANCELS), name(AUDIT), name(ASK), name(ANSWER));
    // A log and the exchange that appends to it share one name.
    let control = name(CONTROL);
    let decisions = format!("({})\\..+", DECISION_KINDS.join("|"));
    let (configure, write, read, topic_write, topic_read) = match role {
        Role::Runner => {
            let u = regex_escape(user);
            let own = name(&format!("{REPLY}\\.{u}\\..+"));
            (
                format!("^{own}$"),
                any_of(&[ask, cancels, own.clone()]),
                any_of(&[route, own]),
                NOTHING.to_owned(),
                format!("^{REPLY}\\.{u}\\..+$"),
            )
        }
        Role::Worker => {
            let all = format!("^{p}\\..*$");
            let published = format!("^(({STEP}|{HUMAN}|{REPLY})\\..+|{decisions})$");
            let bound = format!("^({REQUESTS}|{RESULTS}|{STEP}\\..+|{HUMAN}\\..+)$");
            (all.clone(), all.clone(), all, published, bound)
        }
        Role::Step(step) => {
            let queue = name(&format!("{STEP}\\.{}", regex_escape(step)));
            // Its queue, the logs of its scores and model answers, and the rate limiters, which steps
            // share by the name of a provider account.
            let own = name(&format!("({SCORES}|{SAMPLES})\\.{}", regex_escape(step)));
            let limiters = name(&format!("{LIMITER}\\..+"));
            let key = format!("^{STEP}\\.{}$", regex_escape(step));
            let owned = [queue.clone(), own, limiters];
            (
                any_of(&owned),
                any_of(&[[answer, dlx].as_slice(), &owned].concat()),
                any_of(&[[route].as_slice(), &owned].concat()),
                NOTHING.to_owned(),
                key,
            )
        }
        Role::Reviewer { instance, pools } => {
            let pools: Vec<String> = pools.iter().map(|pool| regex_escape(pool)).collect();
            let instance = regex_escape(instance);
            let humans = name(&format!("{HUMAN}\\.({})", pools.join("|")));
            let own = name(&format!("{REPLY}\\.{instance}"));
            let keys = format!("^({REPLY}\\.{instance}|{HUMAN}\\.({}))$", pools.join("|"));
            (
                any_of(&[own.clone(), humans.clone(), control.clone()]),
                any_of(&[answer, dlx, route.clone(), own.clone(), humans.clone(), control.clone()]),
                any_of(&[route, cancels, own, humans, control]),
                format!("^{REPLY}\\..+$"),
                keys,
            )
        }
        Role::Auditor => (
            format!("^{audit}$"),
            any_of(&[audit.clone(), dlx]),
            any_of(&[route, audit]),
            NOTHING.to_owned(),
            format!("^{decisions}$"),
        ),
        Role::Operator => {
            let control = format!("^{control}$");
            (control.clone(), control.clone(), control, NOTHING.to_owned(), NOTHING.to_owned())
        }
    };
    let permission = Permission { user: user.to_owned(), vhost: vhost.to_owned(), configure, write, read };
    let topic = TopicPermission {
        user: user.to_owned(),
        vhost: vhost.to_owned(),
        exchange: format!("{prefix}.{ROUTE}"),
        write: topic_write,
        read: topic_read,
    };
    (permission, topic)
}

/// RabbitMQ's `rabbit_password_hashing_sha256`: base64 of a 4-byte salt and the SHA-256 of
/// the salt and the password.
fn password_hash(password: &str) -> Result<String, RolesError> {
    let mut salt = [0u8; 4];
    SystemRandom::new().fill(&mut salt).map_err(|_| RolesError::Random)?;
    let mut salted = salt.to_vec();
    salted.extend_from_slice(password.as_bytes());
    let mut hash = salt.to_vec();
    hash.extend_from_slice(digest(&SHA256, &salted).as_ref());
    Ok(BASE64.encode(hash))
}

fn default_prefix() -> String {
    DEFAULT_PREFIX.to_owned()
}

fn default_vhost() -> String {
    "/".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_hash_is_rabbitmqs_salted_sha256() {
        let hash = BASE64.decode(password_hash("secret").unwrap()).unwrap();
        let (salt, sha) = hash.split_at(4);
        assert_eq!(sha, digest(&SHA256, &[salt, b"secret"].concat()).as_ref());
        assert_ne!(password_hash("secret").unwrap(), password_hash("secret").unwrap(), "a fresh salt each time");
    }

    #[test]
    fn names_are_escaped_so_a_user_cannot_widen_its_own_grant() {
        let (permission, topic) = grants("p.x", "/", "a.*", &Role::Runner);
        assert_eq!(permission.read, r"^(p\.x\.route|p\.x\.reply\.a\.\*\..+)$");
        assert_eq!(topic.read, r"^reply\.a\.\*\..+$");
    }

    #[test]
    fn roles_are_checked() {
        let user = |role: &str| RoleUser {
            name: "u".into(),
            role: role.into(),
            password: None,
            instance: None,
            pools: vec![],
        };
        assert_eq!(user("step:scan").role().unwrap(), Role::Step("scan".into()));
        for bad in ["admin", "step:", "reviewer"] {
            assert!(user(bad).role().is_err(), "{bad}");
        }
        let runner_with_pools = RoleUser { pools: vec!["ops".into()], ..user("runner") };
        assert!(runner_with_pools.role().is_err());
    }
}

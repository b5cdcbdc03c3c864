//! What a worker proves and what it checks before it believes a message.
//!
//! - Replies: every `Reply` carries a proof, under the reply key the fleet key agrees with the
//!   request's `runner_key`, over its exact body and the digest of the exact request.
//! - Step tasks: sealed with the fleet's seal key; a `StepResult` is taken only with its task
//!   unchanged, so chain state, step and request digest are the fleet's own.
//! - Who answered: a human answer needs the signature of a reviewer service the worker
//!   trusts; an external step's answer may be limited to the broker users configured for it
//!   (RabbitMQ checks the `user_id` a message carries against its publisher).
//!
//! An unsigned worker (`--insecure-unsigned`) proves and checks none of this.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use airlock_contract::v1;
use airlock_integrity::{FleetKey, PublicKeys, ReplyKey, SealKey, Signing, VerifyError};
use airlock_records::signed::verify_human_answer;
use prost::Message as _;

/// Reply keys kept per worker: one X25519 agreement per runner, repeated only after this many
/// other runners were seen.
const MAX_REPLY_KEYS: usize = 65_536;

/// A worker's keys and the rules its external steps' answers must meet.
#[derive(Debug)]
pub struct Trust {
    fleet: Option<FleetKeys>,
    reviewers: PublicKeys<Signing>,
    step_users: BTreeMap<String, BTreeSet<String>>,
}

#[derive(Debug)]
struct FleetKeys {
    key: FleetKey,
    seal: SealKey,
    reply_keys: Mutex<HashMap<[u8; 32], Arc<ReplyKey>>>,
}

/// Why a message was not believed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Distrust {
    /// The request's `runner_key` is not a usable X25519 public key.
    #[error("runner_key is not a usable X25519 public key ({0})")]
    RunnerKey(String),
    /// The step task is not as the fleet sealed it.
    #[error("the step task is not sealed by this fleet ({0})")]
    Seal(VerifyError),
    /// A human answer without a trusted reviewer service's signature.
    #[error("the human answer is not signed by a trusted reviewer service ({0})")]
    Reviewer(VerifyError),
    /// An answer from a broker user the step does not take answers from.
    #[error(
        "step '{step}' takes answers only from broker users {allowed:?}, not from {}",
        user.as_deref().map_or("a publisher that named no user".to_owned(), |user| format!("'{user}'"))
    )]
    Publisher {
        /// The step.
        step: String,
        /// Its users.
        allowed: BTreeSet<String>,
        /// Who published the answer, as the broker said.
        user: Option<String>,
    },
}

impl Trust {
    /// Proves replies and seals tasks with `key`; takes human answers signed by `reviewers`.
    pub fn signed(key: FleetKey, reviewers: PublicKeys<Signing>) -> Self {
        let seal = key.seal_key();
        let fleet = FleetKeys { key, seal, reply_keys: Mutex::new(HashMap::new()) };
        Self { fleet: Some(fleet), reviewers, step_users: BTreeMap::new() }
    }

    /// Proves nothing and believes every message: for a fleet that runs without keys.
    pub fn insecure() -> Self {
        Self { fleet: None, reviewers: PublicKeys::default(), step_users: BTreeMap::new() }
    }

    /// Takes answers to the external step `step` only from the broker users `users`.
    #[must_use]
    pub fn with_step_users(mut self, step: impl Into<String>, users: impl IntoIterator<Item = String>) -> Self {
        self.step_users.entry(step.into()).or_default().extend(users);
        self
    }

    /// Whether the external step `step` is configured here (with the users it takes answers from).
    pub(crate) fn configures(&self, step: &str) -> bool {
        self.step_users.contains_key(step)
    }

    /// Refuses a `runner_key` no reply could be proved for.
    pub(crate) fn check_runner_key(&self, runner_key: &[u8]) -> Result<(), Distrust> {
        match &self.fleet {
            Some(fleet) if !runner_key.is_empty() => fleet.reply_key(runner_key).map(|_| ()),
            _ => Ok(()),
        }
    }

    /// The `Reply` carrying `body` (an encoded `ReplyBody`) to the runner whose public key is
    /// `runner_key`, for its request whose digest is `digest`: proved when this worker is
    /// signed and the runner gave a key.
    pub(crate) fn reply(&self, body: Vec<u8>, runner_key: &[u8], digest: &[u8; 32]) -> v1::Reply {
        let key = match &self.fleet {
            Some(fleet) if !runner_key.is_empty() => fleet.reply_key(runner_key).ok(),
            _ => None,
        };
        let Some(key) = key else { return v1::Reply { body, ..Default::default() } };
        let proof = key.prove(digest, &body);
        v1::Reply { body, key_id: proof.key_id.as_str().to_owned(), proof: proof.tag.to_vec() }
    }

    /// Seals `task` as it stands.
    pub(crate) fn seal(&self, task: &mut v1::StepTask) {
        task.seal.clear();
        if let Some(fleet) = &self.fleet {
            task.seal = fleet.seal.seal(&[&task.encode_to_vec()]).0.to_vec();
        }
    }

    /// Checks that `task` is exactly as a worker of this fleet sealed it.
    pub(crate) fn check_seal(&self, task: &v1::StepTask) -> Result<(), Distrust> {
        let Some(fleet) = &self.fleet else { return Ok(()) };
        if task.seal.is_empty() {
            return Err(Distrust::Seal(VerifyError::Unsigned));
        }
        let unsealed = v1::StepTask { seal: Vec::new(), ..task.clone() };
        match fleet.seal.check(&[&unsealed.encode_to_vec()], &task.seal) {
            true => Ok(()),
            false => Err(Distrust::Seal(VerifyError::Invalid)),
        }
    }

    /// Checks a human answer's signature by a reviewer service.
    pub(crate) fn check_reviewer(&self, result: &v1::StepResult) -> Result<(), Distrust> {
        match self.fleet {
            Some(_) => verify_human_answer(&self.reviewers, result).map_err(Distrust::Reviewer),
            None => Ok(()),
        }
    }

    /// Checks that the answer to `step` came from one of its broker users, when it has any.
    pub(crate) fn check_publisher(&self, step: &str, user: Option<&str>) -> Result<(), Distrust> {
        match self.step_users.get(step) {
            Some(allowed) if !user.is_some_and(|user| allowed.contains(user)) => Err(Distrust::Publisher {
                step: step.to_owned(),
                allowed: allowed.clone(),
                user: user.map(str::to_owned),
            }),
            _ => Ok(()),
        }
    }
}

impl FleetKeys {
    fn reply_key(&self, runner_key: &[u8]) -> Result<Arc<ReplyKey>, Distrust> {
        let runner: [u8; 32] =
            runner_key.try_into().map_err(|_| Distrust::RunnerKey(format!("{} bytes, not 32", runner_key.len())))?;
        let mut keys = self.reply_keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(key) = keys.get(&runner) {
            return Ok(key.clone());
        }
        let key = Arc::new(self.key.reply_key(&runner).map_err(|e| Distrust::RunnerKey(e.to_string()))?);
        if keys.len() >= MAX_REPLY_KEYS {
            keys.clear();
        }
        keys.insert(runner, key.clone());
        Ok(key)
    }
}

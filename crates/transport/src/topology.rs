//! The queues and exchanges of a fleet, all named from one prefix so several fleets (and
//! tests) share a broker.
//!
//! | name | what |
//! |---|---|
//! | `<p>.requests` | work queue: runners → policy workers |
//! | `<p>.results` | work queue: external steps and reviewers → policy workers |
//! | `<p>.step.<name>` | work queue per external step |
//! | `<p>.human.<pool>` | work queue per human pool |
//! | `<p>.dlx` → `<p>.dead` | dead-letter exchange (fanout) and its queue |
//! | `<p>.cancels` | fanout exchange: withdrawn requests |
//! | `<p>.reply.<owner>` | a runner's (or a service instance's) private queue |
//! | `<p>.ask` → `<p>.requests` | fanout exchange runners publish requests to |
//! | `<p>.answer` → `<p>.results` | fanout exchange steps and reviewers publish answers to |
//! | `<p>.route` | topic exchange the workers publish tasks, replies and decisions to |
//!
//! Nothing is published through the broker's default exchange: write access to it is write
//! access to every queue. Runners, steps and reviewers each publish to an exchange that
//! reaches one queue, so no routing key or `CC` header of theirs can reach another (RabbitMQ
//! before 4.0.3 does not check `CC` and `BCC` keys against topic permissions). Only the
//! workers publish to `<p>.route`, under one exact key per queue — `step.<name>`,
//! `human.<pool>`, `reply.<owner>` — and each decision once, to the runner's reply key with a
//! copy under `<kind>.<decision>` for whoever records decisions (the auditor). The broker's
//! topic permissions say, per user, which keys of `<p>.route` it may bind (see `airlock
//! topology definitions`).
//!
//! Work queues are durable quorum queues that dead-letter to `<p>.dlx` once a message was
//! returned more than [`DELIVERY_LIMIT`] times, so a message that crashes every worker ends in
//! `<p>.dead` instead of looping. On a cluster each has replicas on several nodes (the
//! transport's `quorum_group_size`, else the broker's default) and works while a majority of
//! them is up; see docs/replication.md. Private queues (a runner's replies, a service's
//! subscription) are quorum queues too, so they survive the loss of any minority of a
//! cluster's nodes with what they hold: a classic queue lives on one node, and while that node
//! is down its owner can neither consume nor declare it again, and replies routed to it are
//! dropped. They expire [`PRIVATE_QUEUE_EXPIRES`] after their last consumer left: they outlive
//! a reconnect, unlike exclusive or auto-delete queues, and still go away when their owner
//! does.

use std::time::Duration;

use crate::Destination;

/// The prefix of a fleet that does not choose one.
pub const DEFAULT_PREFIX: &str = "airlock";
/// Suffix of the requests queue.
pub const REQUESTS: &str = "requests";
/// Suffix of the results queue.
pub const RESULTS: &str = "results";
/// Suffix segment of the external step queues (`<p>.step.<name>`).
pub const STEP: &str = "step";
/// Suffix segment of the human queues (`<p>.human.<pool>`).
pub const HUMAN: &str = "human";
/// Suffix segment of private reply queues (`<p>.reply.<owner>`).
pub const REPLY: &str = "reply";
/// Suffix of the dead-letter exchange.
pub const DLX: &str = "dlx";
/// Suffix of the dead-letter queue.
pub const DEAD: &str = "dead";
/// Suffix of the exchange runners publish requests to.
pub const ASK: &str = "ask";
/// Suffix of the exchange steps and reviewers publish answers to.
pub const ANSWER: &str = "answer";
/// The first word of a decision's routing key on `<p>.route`, per kind.
pub const DECISION_KINDS: [&str; 2] = ["approval", "review"];
/// Suffix of the cancels exchange.
pub const CANCELS: &str = "cancels";
/// Suffix of the routing exchange.
pub const ROUTE: &str = "route";
/// Suffix of the auditor's queue.
pub const AUDIT: &str = "audit";
/// The control log every worker and reviewer service follows.
pub const CONTROL: &str = "control";
/// The logs of a budgeted step's scores, `scores.<step>`.
pub const SCORES: &str = "scores";
/// The logs of a monitor step's model answers, `samples.<step>`.
pub const SAMPLES: &str = "samples";
/// The logs of the rate limiters shared by monitor processes, `limiter.<name>`.
pub const LIMITER: &str = "limiter";
/// How long a limiter's log keeps an entry: a process reads only its last minute.
pub const LIMITER_MAX_AGE: Duration = Duration::from_secs(600);
/// How long the control log keeps an entry: longer than any run.
pub const CONTROL_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// How many times a message may be returned to a work queue (by a requeue or a consumer
/// that went away) before it is dead-lettered.
pub const DELIVERY_LIMIT: u32 = 5;
/// How long a private queue lives without consumers.
pub const PRIVATE_QUEUE_EXPIRES: Duration = Duration::from_secs(30 * 60);

/// What an exchange does with a routing key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExchangeKind {
    /// Every bound queue gets every message.
    Fanout,
    /// Binding keys are patterns of dot-separated words: `*` matches one word, `#` any number.
    Topic,
}

/// A durable exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// Its full name.
    pub name: String,
    /// Its type.
    pub kind: ExchangeKind,
}

/// The kinds of queue a fleet uses; each maps to one fixed set of broker arguments, so every
/// declaration of a queue is identical (RabbitMQ refuses a re-declaration that differs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// A durable quorum queue that dead-letters to `dead_letter_exchange` on reject and after
    /// `delivery_limit` returns.
    Work {
        /// The exchange rejected and poison messages go to.
        dead_letter_exchange: String,
        /// Returns allowed before a message is dead-lettered.
        delivery_limit: u32,
    },
    /// A durable quorum queue with no dead-lettering: the end of the line.
    Dead,
    /// A durable quorum queue that expires after `expires` without consumers.
    Private {
        /// Idle time before the broker deletes the queue.
        expires: Duration,
    },
    /// An append-only log (a RabbitMQ stream): reading takes nothing away, every reader
    /// [follows](crate::Transport::follow) it from its first entry, and entries older than
    /// `max_age` are dropped.
    Log {
        /// How long an entry is kept.
        max_age: Duration,
    },
}

/// A queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queue {
    /// Its full name.
    pub name: String,
    /// Its kind, which fixes its arguments.
    pub kind: QueueKind,
}

/// A queue bound to an exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The exchange.
    pub exchange: String,
    /// The queue.
    pub queue: String,
    /// The binding key (a pattern on topic exchanges, ignored by fanout ones).
    pub routing_key: String,
}

/// A set of exchanges, queues and bindings to declare, named from a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    prefix: String,
    exchanges: Vec<Exchange>,
    queues: Vec<Queue>,
    bindings: Vec<Binding>,
}

impl Topology {
    /// The core of a fleet: the requests and results queues with the exchanges that feed
    /// them, the dead-letter exchange and queue, the routing and cancels exchanges, and the
    /// control log.
    pub fn new(prefix: impl Into<String>) -> Self {
        let topology = Self::empty(prefix);
        let dlx = topology.dead_letter_exchange();
        let dead = topology.dead_queue();
        let cancels = topology.cancels_exchange();
        let route = topology.route_exchange();
        let (ask, answer) = (topology.ask_exchange(), topology.answer_exchange());
        let (requests, results) = (topology.requests_queue(), topology.results_queue());
        topology
            .with_exchange(dlx.clone(), ExchangeKind::Fanout)
            .with_queue(dead.clone(), QueueKind::Dead)
            .with_binding(dlx, dead, "")
            .with_exchange(cancels, ExchangeKind::Fanout)
            .with_exchange(route, ExchangeKind::Topic)
            .with_exchange(ask.clone(), ExchangeKind::Fanout)
            .with_exchange(answer.clone(), ExchangeKind::Fanout)
            .with_work_queue(REQUESTS)
            .with_work_queue(RESULTS)
            .with_binding(ask, requests, REQUESTS)
            .with_binding(answer, results, RESULTS)
            .with_control_log()
    }

    /// Nothing yet, with the names of `prefix`: the start of a fragment, such as one more
    /// step queue discovered at run time (`Topology::empty(p).with_step("monitor")`).
    pub fn empty(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into(), exchanges: Vec::new(), queues: Vec::new(), bindings: Vec::new() }
    }

    /// Adds the queue of the external step `name`, routed as `step.<name>`.
    #[must_use]
    pub fn with_step(self, name: &str) -> Self {
        self.with_routed_work_queue(&format!("{STEP}.{name}"))
    }

    /// Adds the queue of the human pool `pool`, routed as `human.<pool>`.
    #[must_use]
    pub fn with_human_pool(self, pool: &str) -> Self {
        self.with_routed_work_queue(&format!("{HUMAN}.{pool}"))
    }

    /// Adds the work queue `<p>.<suffix>` that gets a copy of every decision, bound to the
    /// routing exchange under `<kind>.*` for each kind.
    #[must_use]
    pub fn with_decisions_queue(self, suffix: &str) -> Self {
        let (route, queue) = (self.route_exchange(), self.name(suffix));
        DECISION_KINDS.iter().fold(self.with_work_queue(suffix), |topology, kind| {
            topology.with_binding(route.clone(), queue.clone(), format!("{kind}.*"))
        })
    }

    /// Adds the fleet's control log `<p>.control` (see [`CONTROL`]).
    #[must_use]
    pub fn with_control_log(self) -> Self {
        self.with_log(CONTROL, CONTROL_MAX_AGE)
    }

    /// Adds the log of the scores of the budgeted step `step`, `<p>.scores.<step>`.
    #[must_use]
    pub fn with_scores_log(self, step: &str) -> Self {
        self.with_log(&format!("{SCORES}.{step}"), CONTROL_MAX_AGE)
    }

    /// Adds the log of the model answers of the monitor step `step`, `<p>.samples.<step>`,
    /// keeping each for `max_age` (every process of the step must declare the same age).
    #[must_use]
    pub fn with_samples_log(self, step: &str, max_age: Duration) -> Self {
        self.with_log(&format!("{SAMPLES}.{step}"), max_age)
    }

    /// Adds the log of the rate limiter `name`, `<p>.limiter.<name>`.
    #[must_use]
    pub fn with_limiter_log(self, name: &str) -> Self {
        self.with_log(&format!("{LIMITER}.{name}"), LIMITER_MAX_AGE)
    }

    /// Adds the log `<p>.<suffix>` with the fanout exchange of the same name that appends to
    /// it, so that who may append is a permission on one name, never on the default exchange.
    fn with_log(self, suffix: &str, max_age: Duration) -> Self {
        let name = self.name(suffix);
        self.with_exchange(name.clone(), ExchangeKind::Fanout)
            .with_queue(name.clone(), QueueKind::Log { max_age })
            .with_binding(name.clone(), name, "")
    }

    /// Adds the private reply queue of `owner` (a runner, or a service instance that
    /// subscribes to an exchange), routed as `reply.<owner>`.
    #[must_use]
    pub fn with_reply_queue(self, owner: &str) -> Self {
        let name = self.reply_queue(owner);
        let route = self.route_exchange();
        self.with_queue(name.clone(), QueueKind::Private { expires: PRIVATE_QUEUE_EXPIRES }).with_binding(
            route,
            name,
            format!("{REPLY}.{owner}"),
        )
    }

    /// Adds the work queue `<p>.<suffix>`, bound to the routing exchange under `<suffix>`.
    fn with_routed_work_queue(self, suffix: &str) -> Self {
        let (route, queue) = (self.route_exchange(), self.name(suffix));
        self.with_work_queue(suffix).with_binding(route, queue, suffix)
    }

    /// Adds a work queue `<p>.<suffix>` (quorum, dead-lettering to `<p>.dlx`).
    #[must_use]
    pub fn with_work_queue(self, suffix: &str) -> Self {
        let name = self.name(suffix);
        let kind =
            QueueKind::Work { dead_letter_exchange: self.dead_letter_exchange(), delivery_limit: DELIVERY_LIMIT };
        self.with_queue(name, kind)
    }

    /// Adds a queue (a second one of the same name is ignored).
    #[must_use]
    pub fn with_queue(mut self, name: impl Into<String>, kind: QueueKind) -> Self {
        let name = name.into();
        if !self.queues.iter().any(|queue| queue.name == name) {
            self.queues.push(Queue { name, kind });
        }
        self
    }

    /// Adds a durable exchange (a second one of the same name is ignored).
    #[must_use]
    pub fn with_exchange(mut self, name: impl Into<String>, kind: ExchangeKind) -> Self {
        let name = name.into();
        if !self.exchanges.iter().any(|exchange| exchange.name == name) {
            self.exchanges.push(Exchange { name, kind });
        }
        self
    }

    /// Binds `queue` to `exchange` with `routing_key`.
    #[must_use]
    pub fn with_binding(
        mut self,
        exchange: impl Into<String>,
        queue: impl Into<String>,
        routing_key: impl Into<String>,
    ) -> Self {
        let binding = Binding { exchange: exchange.into(), queue: queue.into(), routing_key: routing_key.into() };
        if !self.bindings.contains(&binding) {
            self.bindings.push(binding);
        }
        self
    }

    /// The prefix every name starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `<p>.<suffix>`.
    pub fn name(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.prefix)
    }

    /// The requests queue.
    pub fn requests_queue(&self) -> String {
        self.name(REQUESTS)
    }

    /// The results queue.
    pub fn results_queue(&self) -> String {
        self.name(RESULTS)
    }

    /// The queue of the external step `name`.
    pub fn step_queue(&self, name: &str) -> String {
        format!("{}.{STEP}.{name}", self.prefix)
    }

    /// The queue of the human pool `pool`.
    pub fn human_queue(&self, pool: &str) -> String {
        format!("{}.{HUMAN}.{pool}", self.prefix)
    }

    /// The private reply queue of `owner`.
    pub fn reply_queue(&self, owner: &str) -> String {
        format!("{}.{REPLY}.{owner}", self.prefix)
    }

    /// The control log's name (of its queue and of the exchange that appends to it).
    pub fn control_log(&self) -> String {
        self.name(CONTROL)
    }

    /// The name of the log of `step`'s scores.
    pub fn scores_log(&self, step: &str) -> String {
        self.name(&format!("{SCORES}.{step}"))
    }

    /// The name of the log of `step`'s model answers.
    pub fn samples_log(&self, step: &str) -> String {
        self.name(&format!("{SAMPLES}.{step}"))
    }

    /// The name of the log of the rate limiter `name`.
    pub fn limiter_log(&self, name: &str) -> String {
        self.name(&format!("{LIMITER}.{name}"))
    }

    /// Where an entry is appended to the log `log` (a name from [`Topology::control_log`] or
    /// [`Topology::scores_log`]).
    pub fn log_route(log: &str) -> Destination {
        Destination::exchange(log, "")
    }

    /// The dead-letter exchange.
    pub fn dead_letter_exchange(&self) -> String {
        self.name(DLX)
    }

    /// The dead-letter queue.
    pub fn dead_queue(&self) -> String {
        self.name(DEAD)
    }

    /// The cancels exchange (fanout).
    pub fn cancels_exchange(&self) -> String {
        self.name(CANCELS)
    }

    /// The routing exchange (topic).
    pub fn route_exchange(&self) -> String {
        self.name(ROUTE)
    }

    /// The exchange runners publish requests to (fanout to the requests queue only).
    pub fn ask_exchange(&self) -> String {
        self.name(ASK)
    }

    /// The exchange steps and reviewer services publish answers to (fanout to the results
    /// queue only).
    pub fn answer_exchange(&self) -> String {
        self.name(ANSWER)
    }

    /// Where runners publish requests.
    pub fn requests_route(&self) -> Destination {
        Destination::route(self.ask_exchange(), REQUESTS)
    }

    /// Where external steps and reviewer services publish their answers.
    pub fn results_route(&self) -> Destination {
        Destination::route(self.answer_exchange(), RESULTS)
    }

    /// The routing key of a decision of `kind` (`approval` or `review`), e.g.
    /// `approval.reject`, under which the workers copy it to `<p>.route`.
    pub fn decision_key(kind: impl std::fmt::Display, decision: impl std::fmt::Display) -> String {
        format!("{kind}.{decision}")
    }

    /// Where the tasks of the external step `name` are published.
    pub fn step_route(&self, name: &str) -> Destination {
        Destination::route(self.route_exchange(), format!("{STEP}.{name}"))
    }

    /// Where the tasks of the human pool `pool` are published.
    pub fn human_route(&self, pool: &str) -> Destination {
        Destination::route(self.route_exchange(), format!("{HUMAN}.{pool}"))
    }

    /// Where a reply to the private queue named `queue` (`<p>.reply.<owner>`) is published;
    /// `None` for a name that is not a reply queue of this fleet.
    pub fn reply_route(&self, queue: &str) -> Option<Destination> {
        let owner = queue.strip_prefix(&self.prefix)?.strip_prefix('.')?.strip_prefix(REPLY)?.strip_prefix('.')?;
        (!owner.is_empty()).then(|| Destination::route(self.route_exchange(), format!("{REPLY}.{owner}")))
    }

    /// The exchanges, in declaration order.
    pub fn exchanges(&self) -> &[Exchange] {
        &self.exchanges
    }

    /// The queues, in declaration order.
    pub fn queues(&self) -> &[Queue] {
        &self.queues
    }

    /// The bindings, declared after the exchanges and queues.
    pub fn bindings(&self) -> &[Binding] {
        &self.bindings
    }

    /// Adds everything of `other` that this topology does not have yet.
    pub(crate) fn merge(&mut self, other: &Topology) {
        for exchange in &other.exchanges {
            if !self.exchanges.iter().any(|e| e.name == exchange.name) {
                self.exchanges.push(exchange.clone());
            }
        }
        for queue in &other.queues {
            if !self.queues.iter().any(|q| q.name == queue.name) {
                self.queues.push(queue.clone());
            }
        }
        for binding in &other.bindings {
            if !self.bindings.contains(binding) {
                self.bindings.push(binding.clone());
            }
        }
    }

    /// Forgets everything of `other` (after it was deleted).
    pub(crate) fn remove(&mut self, other: &Topology) {
        self.exchanges.retain(|e| !other.exchanges.iter().any(|o| o.name == e.name));
        self.queues.retain(|q| !other.queues.iter().any(|o| o.name == q.name));
        self.bindings.retain(|b| {
            !other.exchanges.iter().any(|o| o.name == b.exchange) && !other.queues.iter().any(|o| o.name == b.queue)
        });
    }
}

impl Default for Topology {
    /// The core of the fleet named [`DEFAULT_PREFIX`].
    fn default() -> Self {
        Self::new(DEFAULT_PREFIX)
    }
}

#[cfg(test)]
mod tests;

//! Who holds the replicas of the fleet's quorum queues, asked of RabbitMQ's management API:
//! AMQP cannot tell a queue's members. `GET /api/queues/<vhost>/<name>` answers `members`
//! (every node with a replica) and `online` (those running now).

use std::num::NonZeroU32;
use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;

/// The management API's port when `--management-url` is not given.
pub const DEFAULT_MANAGEMENT_PORT: u16 = 15672;

/// How long one question to the management API may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One management API to ask, and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Api {
    /// The API's base URL, without credentials.
    base: Url,
    user: String,
    password: String,
    vhost: String,
}

impl Api {
    /// The APIs to try in turn: the `--management-url` list, or else one per node of the
    /// `--amqp` list at its host on port 15672. The user, password and vhost are the AMQP
    /// URL's, unless a management URL carries its own user and password.
    pub fn for_fleet(amqp: &str, management: Option<&str>) -> Result<Vec<Api>, String> {
        let first = amqp.split(',').map(str::trim).next().unwrap_or_default();
        let broker = Url::parse(first).map_err(|e| format!("the AMQP URL: {e}"))?;
        let vhost = match broker.path() {
            "" | "/" => "/".to_owned(),
            path => decode(&path[1..]),
        };
        let (user, password) = (decode(broker.username()), decode(broker.password().unwrap_or_default()));
        let bases: Vec<Url> = match management {
            Some(list) => list
                .split(',')
                .map(|url| Url::parse(url.trim()).map_err(|e| format!("--management-url {url}: {e}")))
                .collect::<Result<_, _>>()?,
            None => amqp
                .split(',')
                .map(|url| {
                    let node = Url::parse(url.trim()).map_err(|e| format!("the AMQP URL: {e}"))?;
                    let host = node.host_str().ok_or("an AMQP URL without a host")?;
                    let host =
                        if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.into() };
                    Url::parse(&format!("http://{host}:{DEFAULT_MANAGEMENT_PORT}/")).map_err(|e| e.to_string())
                })
                .collect::<Result<_, String>>()?,
        };
        let mut apis: Vec<Api> = Vec::new();
        for mut base in bases {
            let (user, password) = if base.username().is_empty() {
                (user.clone(), password.clone())
            } else {
                (decode(base.username()), decode(base.password().unwrap_or_default()))
            };
            let _ = base.set_username("");
            let _ = base.set_password(None);
            let api = Api { base, user, password, vhost: vhost.clone() };
            if !apis.contains(&api) {
                apis.push(api);
            }
        }
        Ok(apis)
    }

    /// The base URL, for messages.
    pub fn base(&self) -> &str {
        self.base.as_str()
    }

    /// `GET /api/queues/<vhost>/<name>` of this API.
    fn queue_url(&self, name: &str) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            // Each pushed segment is percent-encoded, so the vhost `/` becomes `%2F`.
            segments.pop_if_empty().extend(["api", "queues", self.vhost.as_str(), name]);
        }
        url
    }
}

/// The replicas of one quorum queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Members {
    /// Every node with a replica.
    #[serde(default)]
    pub members: Vec<String>,
    /// The members running now.
    #[serde(default)]
    pub online: Vec<String>,
}

impl Members {
    /// What is wrong with these replicas of `queue`, given the `wanted` group size (`None`:
    /// the broker's default, which this cannot know, so only members that are down count).
    pub fn shortfalls(&self, queue: &str, wanted: Option<NonZeroU32>) -> Vec<String> {
        let mut found = Vec::new();
        let count = self.members.len();
        if let Some(wanted) = wanted
            && count < wanted.get() as usize
        {
            found.push(format!(
                "quorum queue {queue} has {count} member{} ({}) where --quorum-group-size asks for {wanted}: \
                 the cluster had fewer nodes when it was created; add replicas with \
                 `rabbitmq-queues grow <node> all` once it has more",
                if count == 1 { "" } else { "s" },
                self.members.join(", "),
            ));
        }
        let offline: Vec<&String> = self.members.iter().filter(|member| !self.online.contains(member)).collect();
        if !offline.is_empty() {
            let up = count - offline.len();
            let majority = count / 2 + 1;
            let state = if up >= majority {
                format!("{up} of {count} up, a majority: it works, with less to spare")
            } else {
                format!("{up} of {count} up, less than the majority of {majority}: it is unavailable")
            };
            let names = offline.iter().map(|name| name.as_str()).collect::<Vec<_>>().join(", ");
            found.push(format!("quorum queue {queue} has members down ({names}): {state}"));
        }
        found
    }
}

/// Asks `apis` in turn for the members of `queue` until one answers; the error says why none
/// did.
pub async fn members(http: &reqwest::Client, apis: &[Api], queue: &str) -> Result<Members, String> {
    let mut failures = Vec::new();
    for api in apis {
        let request = http.get(api.queue_url(queue)).basic_auth(&api.user, Some(&api.password)).timeout(TIMEOUT);
        match request.send().await {
            Ok(response) if response.status().is_success() => {
                return response.json::<Members>().await.map_err(|e| format!("{}: {e}", api.base()));
            }
            Ok(response) => failures.push(format!("{} answered {}", api.base(), response.status())),
            Err(error) => failures.push(format!("{}: {error}", api.base())),
        }
    }
    Err(failures.join("; "))
}

/// `text` with its `%XX` escapes decoded (a URL's user, password and vhost).
fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_management_api_defaults_to_each_node_on_port_15672_as_the_amqp_user() {
        let apis =
            Api::for_fleet("amqp://ops:p%40ss@rabbit-1:5672/%2f, amqp://ops:p%40ss@rabbit-2:5673/%2f", None).unwrap();
        let bases: Vec<&str> = apis.iter().map(Api::base).collect();
        assert_eq!(bases, ["http://rabbit-1:15672/", "http://rabbit-2:15672/"]);
        assert_eq!((apis[0].user.as_str(), apis[0].password.as_str(), apis[0].vhost.as_str()), ("ops", "p@ss", "/"));
        assert_eq!(
            apis[0].queue_url("airlock.requests").as_str(),
            "http://rabbit-1:15672/api/queues/%2F/airlock.requests"
        );
    }

    #[test]
    fn a_management_url_may_carry_its_own_user_and_a_path() {
        let apis =
            Api::for_fleet("amqp://ops:secret@rabbit/fleet", Some("https://admin:pw@mgmt.example/rabbitmq/")).unwrap();
        assert_eq!(apis.len(), 1);
        assert_eq!((apis[0].user.as_str(), apis[0].password.as_str()), ("admin", "pw"));
        assert_eq!(apis[0].base(), "https://mgmt.example/rabbitmq/", "no credentials in messages");
        assert_eq!(apis[0].queue_url("q").as_str(), "https://mgmt.example/rabbitmq/api/queues/fleet/q");
    }

    #[test]
    fn fewer_members_than_asked_for_and_members_down_are_told() {
        let three = NonZeroU32::new(3);
        let one = Members { members: vec!["a".into()], online: vec!["a".into()] };
        let found = one.shortfalls("p.requests", three);
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("has 1 member (a) where --quorum-group-size asks for 3"), "{found:?}");
        assert!(one.shortfalls("p.requests", None).is_empty(), "the broker's default is not second-guessed");

        let full = Members { members: vec!["a".into(), "b".into(), "c".into()], online: vec!["a".into(), "b".into()] };
        let found = full.shortfalls("p.dead", three);
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("members down (c): 2 of 3 up, a majority"), "{found:?}");
        let lost = Members { online: vec!["a".into()], ..full.clone() };
        assert!(lost.shortfalls("p.dead", None)[0].contains("1 of 3 up, less than the majority of 2"));
        let healthy = Members { online: full.members.clone(), ..full };
        assert!(healthy.shortfalls("p.dead", three).is_empty());
    }
}

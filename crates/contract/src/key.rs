//! The text form of a call key ([`CallKey::correlation_id`]), used as the AMQP correlation id
//! of requests and replies.

use std::fmt::Write;

use crate::v1::{CallKey, Kind};

impl CallKey {
    /// `kind/run/sample/epoch/call`, then `/tenant` when the key names a tenant, each part
    /// percent-encoded so `/` and `%` inside ids cannot make two keys collide. Approval and
    /// review of one call differ by `kind`; the same call of two tenants by the last part.
    pub fn correlation_id(&self, kind: Kind) -> String {
        let parts = self.run_id.len() + self.sample_id.len() + self.tool_call_id.len() + self.tenant.len();
        let mut out = String::with_capacity(24 + parts);
        out.push_str(match kind {
            Kind::Review => "review",
            _ => "approval",
        });
        for part in [self.run_id.as_str(), self.sample_id.as_str()] {
            out.push('/');
            encode(&mut out, part);
        }
        let _ = write!(out, "/{}/", self.epoch);
        encode(&mut out, &self.tool_call_id);
        if !self.tenant.is_empty() {
            out.push('/');
            encode(&mut out, &self.tenant);
        }
        out
    }
}

/// `part` as a part of a correlation id: `%` and `/` percent-encoded, so that parts joined by
/// `/` never run into each other.
pub fn encode_part(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    encode(&mut out, part);
    out
}

fn encode(out: &mut String, part: &str) {
    for c in part.chars() {
        match c {
            '%' | '/' => {
                let _ = write!(out, "%{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(run: &str, sample: &str, call: &str, tenant: &str) -> CallKey {
        CallKey {
            run_id: run.into(),
            sample_id: sample.into(),
            epoch: 1,
            tool_call_id: call.into(),
            tenant: tenant.into(),
        }
    }

    #[test]
    fn slashes_in_ids_do_not_collide() {
        let a = key("r/1", "s", "c", "");
        let b = key("r", "1/s", "c", "");
        assert_eq!(a.correlation_id(Kind::Approval), "approval/r%2F1/s/1/c");
        assert_ne!(a.correlation_id(Kind::Approval), b.correlation_id(Kind::Approval));
        assert_ne!(a.correlation_id(Kind::Approval), a.correlation_id(Kind::Review));
    }

    #[test]
    fn a_tenant_is_a_part_of_its_own_and_no_tenant_keeps_the_old_id() {
        let alice = key("r", "s", "c", "alice");
        assert_eq!(alice.correlation_id(Kind::Approval), "approval/r/s/1/c/alice");
        assert_eq!(key("r", "s", "c", "").correlation_id(Kind::Approval), "approval/r/s/1/c");
        // No call id can stand in for a tenant, nor a tenant for a call id.
        let ids = [
            key("r", "s", "c/alice", "").correlation_id(Kind::Approval),
            key("r", "s", "c", "bob").correlation_id(Kind::Approval),
            key("r", "s", "c", "al/ice").correlation_id(Kind::Approval),
            key("r", "s", "c/al", "ice").correlation_id(Kind::Approval),
        ];
        for id in &ids {
            assert_ne!(*id, alice.correlation_id(Kind::Approval));
        }
        assert_ne!(ids[2], ids[3]);
    }
}

//! The text form of a call key, used as the AMQP correlation id of requests and replies.

use std::fmt::Write;

use crate::v1::{CallKey, Kind};

impl CallKey {
    /// `kind/run/sample/epoch/call`, each part percent-encoded so `/` and `%` inside ids
    /// cannot make two keys collide. Approval and review of one call differ by `kind`.
    pub fn correlation_id(&self, kind: Kind) -> String {
        let mut out = String::with_capacity(16 + self.run_id.len() + self.sample_id.len() + self.tool_call_id.len());
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
        out
    }
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

    #[test]
    fn slashes_in_ids_do_not_collide() {
        let a = CallKey { run_id: "r/1".into(), sample_id: "s".into(), epoch: 1, tool_call_id: "c".into() };
        let b = CallKey { run_id: "r".into(), sample_id: "1/s".into(), epoch: 1, tool_call_id: "c".into() };
        assert_eq!(a.correlation_id(Kind::Approval), "approval/r%2F1/s/1/c");
        assert_ne!(a.correlation_id(Kind::Approval), b.correlation_id(Kind::Approval));
        assert_ne!(a.correlation_id(Kind::Approval), a.correlation_id(Kind::Review));
    }
}

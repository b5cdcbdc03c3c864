//! The OpenAPI document the gateway serves at `/openapi.json`.

use crate::Limits;

/// The OpenAPI 3.1 document of this API, as committed in `docs/gateway.openapi.json`.
pub const OPENAPI: &str = include_str!("../../../docs/gateway.openapi.json");

/// [`OPENAPI`] as a gateway with `limits` serves it: the committed document holds the
/// default limits, and a client generator or a fuzzer must see the ones in force.
pub fn document(limits: &Limits) -> String {
    let mut document: serde_json::Value = serde_json::from_str(OPENAPI).expect("the committed document is JSON");
    let timeout = &mut document["components"]["schemas"]["Timeout"];
    if timeout.is_object() {
        let max = limits.max_timeout;
        timeout["maximum"] = match max.subsec_nanos() {
            0 => serde_json::json!(max.as_secs()),
            _ => serde_json::json!(max.as_secs_f64()),
        };
    }
    serde_json::to_string_pretty(&document).expect("a document serialises")
}

use super::*;
use crate::Kind;
use crate::chain::Policy;

fn control(text: &str) -> Result<Control, String> {
    Policy::parse("p.yaml", text, Kind::Approval).map(|policy| policy.control().clone()).map_err(|e| e.to_string())
}

const STEPS: &str = "approvers:\n  - name: auto\n    tools: \"*\"\n";

#[test]
fn a_policy_without_control_sections_sends_a_run_to_people_after_one_incident() {
    let control = control(STEPS).unwrap();
    assert_eq!(control.breaker, None);
    assert_eq!(control.incident, IncidentRule { after: 1, then: Response::Human { pool: "default".into() } });
}

#[test]
fn the_default_pool_is_the_first_human_steps() {
    let text = "approvers:\n  - name: human\n    tools: bash\n    pool: secops\n  - name: human\n    tools: \"*\"\n";
    assert_eq!(control(text).unwrap().incident.then, Response::Human { pool: "secops".into() });
}

#[test]
fn a_breaker_and_an_incident_rule_are_read() {
    let text = format!(
        "{STEPS}breaker:\n  rejections_in_a_row: 3\n  rejections_per_sample: 20\n  then: terminate\n\
         incident:\n  after: 2\n  then: policy\n  policy: strict\n"
    );
    let control = control(&text).unwrap();
    let breaker = control.breaker.unwrap();
    assert_eq!((breaker.in_a_row, breaker.per_sample, &breaker.then), (Some(3), Some(20), &Response::Terminate));
    assert!(!breaker.trips(2, 19));
    assert!(breaker.trips(3, 3));
    assert!(breaker.trips(0, 20));
    assert_eq!(control.incident, IncidentRule { after: 2, then: Response::Policy { name: "strict".into() } });
}

#[test]
fn out_of_range_and_unknown_settings_are_refused_where_they_stand() {
    for (section, problem) in [
        ("breaker:\n  then: human\n", "needs 'rejections_in_a_row', 'rejections_per_sample' or both"),
        ("breaker:\n  rejections_in_a_row: 0\n", "'rejections_in_a_row' must be a whole number from 1, not 0"),
        ("breaker:\n  rejections_in_a_row: 2.5\n", "must be a whole number from 1, not 2.5"),
        ("breaker:\n  rejections_in_a_row: 3\n  then: policy\n", "'then' must be one of human, terminate"),
        ("breaker:\n  rejections_in_a_row: 3\n  rejection_in_a_row: 3\n", "unknown parameter 'rejection_in_a_row'"),
        ("incident:\n  then: policy\n", "'then: policy' needs 'policy'"),
        ("incident:\n  then: policy\n  policy: ../etc\n", "policy"),
        ("incident:\n  then: terminate\n  pool: ops\n", "'pool' goes with 'then: human'"),
        ("incident:\n  pool: \"a b\"\n", "pool"),
        ("incident: 3\n", "'incident' must be a mapping, not a number"),
    ] {
        let error = control(&format!("{STEPS}{section}")).unwrap_err();
        assert!(error.contains(problem), "{section:?}: {error}");
        assert!(error.starts_with("p.yaml:"), "{error}");
    }
}

#[test]
fn an_error_points_at_the_offending_setting() {
    let error = control(&format!("{STEPS}breaker:\n  rejections_in_a_row: -1\n")).unwrap_err();
    assert!(error.starts_with("p.yaml:5:"), "{error}");
}

use super::*;

fn matches(tools: &str, candidate: &str) -> bool {
    let globs = expand_tools([tools]);
    ToolMatcher::new(&[globs]).unwrap().step_matches(0, candidate, &mut Budget::evaluation()).unwrap()
}

#[test]
fn tool_names_are_prefixes() {
    assert!(matches("shell", "shell_exec(cmd='ls')"));
    assert!(matches("web_browser_type", "web_browser_type_submit(element_id=1, text='x')"));
    assert!(!matches("bash(", "bash_session(action='type')"));
    assert!(!matches("Shell", "shell(cmd='ls')"));
}

#[test]
fn argument_globs_depend_on_order_and_commas_split() {
    assert!(matches("computer(action='key'", "computer(action='key', text='x')"));
    assert!(!matches("computer(action='key'", "computer(text='x', action='key')"));
    // `text='x'` becomes a glob of its own that matches nothing, so any text passes.
    assert!(matches("computer(action='key', text='x'", "computer(action='key', text='DIFFERENT')"));
}

#[test]
fn stars_cross_newlines_and_slashes() {
    assert!(matches("shell(cmd='echo*rm*", "shell(cmd='echo hi\nrm -rf /tmp')"));
    assert!(matches("read_file(path='/home/*/.ssh/", "read_file(path='/home/a/b/.ssh/id')"));
}

#[test]
fn classes_follow_fnmatch() {
    assert!(!matches("f(items=[1]", "f(items=[1, 2])"));
    assert!(matches("f(items=[[]1", "f(items=[1, 2])"));
    assert!(matches("f(x=[!a]", "f(x=b)"));
    assert!(!matches("f(x=[!a]", "f(x=a)"));
    assert!(matches("f(x=[]]", "f(x=])"));
    assert!(matches("f(x=[^a]", "f(x=^)"));
    assert!(matches("f(x=[a-]", "f(x=-)"));
    assert!(!matches("f(x=[z-a]", "f(x=z)"));
    assert!(matches("f(x=[", "f(x=[)"));
    // `[!]` opens a class whose `]` is a member, so with no later `]` the `[` is literal.
    assert!(!matches("f(x=[!]", "f(x=q)"));
    assert!(matches("f(x=[!]", "f(x=[!])"));
    assert!(matches("f(x=[^!]", "f(x=!)"));
    assert!(!matches("f(x=[^!]", "f(x=q)"));
    assert!(matches("f(x=[[:]", "f(x=:)"));
}

#[test]
fn brace_backslash_and_double_star_are_literal() {
    assert!(matches("bash(cmd='echo {a,b}", "bash(cmd='echo {a,b}')"));
    assert!(!matches("bash(cmd='echo {a,b}", "bash(cmd='echo a')"));
    assert!(matches(r"f(p='C:\dir", r"f(p='C:\dir\x')"));
    assert!(matches("a**b", "a/x/b"));
}

#[test]
fn strip_follows_python() {
    assert_eq!(expand_tools(["\u{1f}bash\u{a0}, ,python*"]), ["bash*", "python*"]);
    assert!(expand_tools([" , "]).is_empty());
}

#[test]
fn non_ascii_is_one_character() {
    assert!(matches("f(x=?)", "f(x=é)"));
    assert!(matches("f(x=[é])", "f(x=é)"));
    assert!(matches("f(x=[!a])", "f(x=é)"));
    assert!(matches("f(x=[à-ë])", "f(x=é)"));
    assert!(!matches("f(x=?)", "f(x=éé)"));
}

#[test]
fn segments_anchor_at_both_ends_and_search_in_between() {
    assert!(matches("a*b*c", "a-b-c"));
    assert!(matches("*c", "abc"));
    assert!(!matches("a?", "a"));
    assert!(matches("*[0-9]*", "abc1"));
    assert!(!matches("*[0-9]*", "abc"));
    let exact = ToolMatcher::new(&[vec!["ab?".into()], vec!["*é[!x]".into()], vec![String::new()]]).unwrap();
    let hit = |step, text| exact.step_matches(step, text, &mut Budget::evaluation()).unwrap();
    assert!(hit(0, "abc") && !hit(0, "abcd"));
    assert!(hit(1, "zzéy") && !hit(1, "zzéx") && !hit(1, "éyz"));
    assert!(hit(2, "") && !hit(2, "x"));
}

#[test]
fn whole_globs_match_the_whole_text() {
    let glob = WholeGlob::new("bash(cmd='ls*')").unwrap();
    assert!(glob.is_match("bash(cmd='ls -la')"));
    assert!(!glob.is_match("bash(cmd='ls -la') and more"), "no star is appended");
    assert!(!glob.is_match("sudo bash(cmd='ls')"), "not a substring search");
    assert!(!WholeGlob::new("bash(cmd='ls')").unwrap().is_match("bash(cmd='ls -la')"));
    assert!(!WholeGlob::new("[z-a]").unwrap().is_match("z"), "an empty range never matches");
}

#[test]
fn an_escaped_text_matches_itself_and_nothing_else() {
    for text in ["bash(cmd='ls *')", "f(x='[a-z]?', y='[!]')", "g(q='**/[', r=']]')", "h(s='a\\nb')", "plain"] {
        let glob = WholeGlob::new(&escape(text)).unwrap();
        assert!(glob.is_match(text), "{text}");
        for other in [format!("{text}x"), text.replacen('*', "anything", 1), text.replacen('?', "z", 1)] {
            assert!(other == text || !glob.is_match(&other), "{text} matched {other}");
        }
    }
    assert!(!WholeGlob::new(&escape("ls [ab]")).unwrap().is_match("ls a"));
    assert!(!WholeGlob::new(&escape("ls ?")).unwrap().is_match("ls x"));
}

/// A `*`, 40,000 `?` and a `b` (a 40,002-character glob): its `?`s are skipped, not searched
/// for at every character, so judging a 300,000-character call costs about as many steps
/// as the call has characters, where searching would cost 40,000 at each of them.
#[test]
fn a_run_of_question_marks_after_a_star_costs_its_length_once() {
    let glob = format!("*{}b", "?".repeat(40_000));
    let matcher = ToolMatcher::new(&[expand_tools([glob.as_str()])]).unwrap();
    let long = format!("f(x='{}')", "a".repeat(300_000));
    let with_b = format!("f(x='{}b{}')", "a".repeat(40_000), "a".repeat(260_000));
    let bound = 40_000 + 2 * 300_000;
    for (call, expected) in [(long.as_str(), false), (with_b.as_str(), true), ("f(x='b')", false)] {
        let mut budget = Budget::new(bound);
        assert_eq!(matcher.step_matches(0, call, &mut budget), Ok(expected), "{:.20}", call);
    }
    assert!(!matches(&glob, &format!("{}b", "a".repeat(39_999))), "the b must follow 40,000 other characters");
    assert!(matches(&glob, &format!("{}b", "a".repeat(40_000))));
}

#[test]
fn question_marks_around_a_floating_segment_keep_their_places() {
    assert!(matches("*??x??*", "abxcd"));
    assert!(!matches("*??x??*", "axcd"));
    assert!(!matches("*??x??*", "abxc"));
    assert!(matches("a*?[0-9]?*z", "a-x1yz"));
    assert!(!matches("a*?[0-9]?*z", "a1yz"));
    assert!(matches("*???*", "abc"));
    assert!(!matches("*????*", "abc"));
    assert!(matches("*é?x", "éé x"));
}

/// A segment of classes searched through a long call is the costly shape left: its match
/// stops at the budget, whatever the outcome would have been.
#[test]
fn matching_past_its_budget_stops() {
    let glob = format!("*{}b", "[a]".repeat(2_000));
    let matcher = ToolMatcher::new(&[expand_tools([glob.as_str()])]).unwrap();
    let call = "a".repeat(100_000);
    let mut budget = Budget::new(1_000_000);
    assert_eq!(matcher.step_matches(0, &call, &mut budget), Err(Exhausted));
    assert_eq!(budget.left(), 0, "what was left is spent, so later globs stop too");
    assert!(!WholeGlob::new(&glob).unwrap().is_match(&call), "a whole glob past its budget does not match");
}

//! The limits a policy document is held to, checked where it is read so that no value of a
//! caller's inline policy reaches the broker or a timer unchecked.
//!
//! - Step and pool names become queue names and routing keys (`<p>.step.<name>`,
//!   `<p>.human.<pool>`): ASCII letters, digits, `_` and `-` only, and in a step name `/`
//!   between words (`demo/append_timeout`), at most [`MAX_NAME_CHARS`] characters. So no name
//!   is a topic wildcard (`*`, `#`) or adds a routing word (`.`).
//! - A step's `timeout` (and a human step's `reroute_after` and `warn_before`) is a number of
//!   seconds above 0 and at most [`MAX_STEP_TIMEOUT`].
//! - A glob of `tools` has at most [`MAX_GLOB_CHARS`] characters.
//! - A step's `model_explanation` says something (not only spaces) in at most
//!   [`MAX_MODEL_EXPLANATION_CHARS`] characters.
//! - No string of the document holds a NUL character, which PostgreSQL text refuses.

use std::time::Duration;

/// The longest step or pool name.
pub const MAX_NAME_CHARS: usize = 64;

/// The longest glob (one comma-separated piece of `tools`, after its `*` is appended).
pub const MAX_GLOB_CHARS: usize = 64 * 1024;

/// The longest `timeout` a step may have: 30 days.
pub const MAX_STEP_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);

/// The longest `model_explanation`: as long as a person's explanation may be.
pub const MAX_MODEL_EXPLANATION_CHARS: usize = 4000;

/// Why a step name cannot be used, if it cannot.
pub fn check_step_name(name: &str) -> Result<(), String> {
    check_name("step name", name, true)
}

/// Why a pool name cannot be used, if it cannot.
pub fn check_pool_name(pool: &str) -> Result<(), String> {
    check_name("pool", pool, false)
}

/// A policy's name as a policy file's control section gives it: letters, digits, '_' and '-'.
pub fn check_policy_name(name: &str) -> Result<(), String> {
    check_name("policy", name, false)
}

fn check_name(what: &str, name: &str, words: bool) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let shape = if words { "letters, digits, '_', '-' and '/' between words" } else { "letters, digits, '_' and '-'" };
    let allowed = if words {
        name.split('/').all(|word| !word.is_empty() && word.chars().all(plain))
    } else {
        name.chars().all(plain)
    };
    if name.is_empty() || !allowed {
        return Err(format!("{what} '{}' must be {shape} only", name.escape_debug()));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("{what} '{name}' is longer than {MAX_NAME_CHARS} characters"));
    }
    Ok(())
}

/// Why a glob is too long, if it is.
pub fn check_glob_length(glob: &str) -> Result<(), String> {
    let chars = glob.chars().count();
    if chars > MAX_GLOB_CHARS {
        return Err(format!("a glob of {chars} characters is longer than the {MAX_GLOB_CHARS} allowed"));
    }
    Ok(())
}

/// Why a `model_explanation` cannot be shown to a model, if it cannot: it would show nothing,
/// or too much.
pub fn check_model_explanation(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("'model_explanation' must say something: it is what the model is shown".into());
    }
    let chars = text.chars().count();
    if chars > MAX_MODEL_EXPLANATION_CHARS {
        return Err(format!(
            "'model_explanation' has {chars} characters, more than the {MAX_MODEL_EXPLANATION_CHARS} allowed"
        ));
    }
    Ok(())
}

/// A step's `timeout` in seconds as a duration, or why it cannot be one.
pub fn step_timeout(seconds: f64) -> Result<Duration, String> {
    step_duration("timeout", seconds)
}

/// A step's duration parameter `key` in seconds as a duration (the rule of `timeout`), or why
/// it cannot be one.
pub fn step_duration(key: &str, seconds: f64) -> Result<Duration, String> {
    let max = MAX_STEP_TIMEOUT.as_secs();
    let bad = || format!("'{key}' must be a number of seconds above 0 and at most {max} (30 days)");
    if !(seconds > 0.0 && seconds <= max as f64) {
        return Err(bad());
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| bad())
}

/// Why a string of the document cannot be stored, if it cannot.
pub fn check_text(text: &str) -> Result<(), String> {
    match text.contains('\0') {
        true => Err("strings in a policy must not contain NUL characters".into()),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests;

//! Triage of the pending list when thousands of tasks wait: a [`Filter`] (pool, tool, run,
//! sample, age, a search in the calls) and an order ([`Sort`]), read from a query string
//! ([`TriageQuery`]) by the API and the UI alike, pages of it behind a keyset [`Cursor`], and
//! the [`Columns`] of a task that the store filters on.
//!
//! The store runs a filter as parameterised SQL on indexed columns, always within the pools
//! the caller may see: a filter narrows that set, never widens it.

use std::fmt;

use airlock_contract::v1;
use airlock_records::convert::{first_with_nul, request_parts};
use serde::Deserialize;

use crate::task::Task;
use crate::ui::call_line;

/// The UI's page size.
pub const UI_PAGE: u32 = 50;
/// The largest page anyone gets when asking for a size.
pub const MAX_PAGE: u32 = 1000;

/// The order of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// The longest waiting first (the pending list's order before triage).
    #[default]
    Oldest,
    /// The newest first.
    Newest,
    /// The soonest deadline first; tasks without one last.
    Deadline,
}

impl Sort {
    /// Every order, as the UI offers them.
    pub const ALL: [Sort; 3] = [Sort::Oldest, Sort::Newest, Sort::Deadline];

    /// Its name in a query string.
    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Oldest => "oldest",
            Sort::Newest => "newest",
            Sort::Deadline => "deadline",
        }
    }

    /// What a person reads.
    pub fn label(self) -> &'static str {
        match self {
            Sort::Oldest => "Oldest first",
            Sort::Newest => "Newest first",
            Sort::Deadline => "Deadline soonest",
        }
    }

    /// The value a task is ordered by under this sort (a [`Cursor`]'s key).
    pub fn key(self, task: &Task) -> i64 {
        match self {
            Sort::Oldest | Sort::Newest => task.received_at,
            Sort::Deadline => task.deadline.unwrap_or(i64::MAX),
        }
    }
}

/// Which pending tasks to show, within the caller's pools.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    /// One of the caller's pools.
    pub pool: Option<String>,
    /// The called function's name, exactly.
    pub tool: Option<String>,
    /// The eval run's id, exactly.
    pub run: Option<String>,
    /// The sample's id, exactly.
    pub sample: Option<String>,
    /// Only tasks waiting at least this many minutes.
    pub older_than_minutes: Option<u32>,
    /// Text the rendered call or its arguments contain, in any case.
    pub search: Option<String>,
    /// The order.
    pub sort: Sort,
}

impl Filter {
    /// Whether anything narrows the list (the order aside).
    pub fn narrows(&self) -> bool {
        self.pool.is_some()
            || self.tool.is_some()
            || self.run.is_some()
            || self.sample.is_some()
            || self.older_than_minutes.is_some()
            || self.search.is_some()
    }

    /// The filter, a page size and a cursor as a query string (without `?`), the inverse of
    /// [`TriageQuery::parse`]; only what is set appears.
    pub fn query_string(&self, limit: Option<u32>, cursor: Option<&Cursor>) -> String {
        let older_than = self.older_than_minutes.map(|m| m.to_string());
        let limit = limit.map(|l| l.to_string());
        let cursor = cursor.map(Cursor::to_string);
        let sort = (self.sort != Sort::Oldest).then_some(self.sort.as_str());
        let pairs: Vec<(&str, &str)> = [
            ("pool", self.pool.as_deref()),
            ("tool", self.tool.as_deref()),
            ("run", self.run.as_deref()),
            ("sample", self.sample.as_deref()),
            ("older_than", older_than.as_deref()),
            ("q", self.search.as_deref()),
            ("sort", sort),
            ("limit", limit.as_deref()),
            ("cursor", cursor.as_deref()),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
        .collect();
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    }
}

/// Where a page starts: after the task with this order key and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The last task's [`Sort::key`].
    pub key: i64,
    /// The last task's id (ties on the key are ordered by id).
    pub id: String,
}

impl Cursor {
    /// The cursor after `task` under `sort`.
    pub fn after(task: &Task, sort: Sort) -> Self {
        Cursor { key: sort.key(task), id: task.id.clone() }
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.key, self.id)
    }
}

impl std::str::FromStr for Cursor {
    type Err = TriageError;

    fn from_str(s: &str) -> Result<Self, TriageError> {
        let bad = || TriageError::Invalid { name: "cursor", value: s.to_owned() };
        let (key, id) = s.split_once('.').ok_or_else(bad)?;
        Ok(Cursor { key: key.parse().map_err(|_| bad())?, id: id.to_owned() })
    }
}

/// A query string that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TriageError {
    /// A parameter's value is not one it takes.
    #[error("'{value}' is not a valid {name}")]
    Invalid {
        /// The parameter.
        name: &'static str,
        /// What was given.
        value: String,
    },
}

/// The triage parameters of `GET /api/tasks` and the pending page, as given: every one
/// optional, an empty one (as a form sends) the same as a missing one.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TriageQuery {
    /// [`Filter::pool`].
    pub pool: Option<String>,
    /// [`Filter::tool`].
    pub tool: Option<String>,
    /// [`Filter::run`].
    pub run: Option<String>,
    /// [`Filter::sample`].
    pub sample: Option<String>,
    /// [`Filter::older_than_minutes`].
    pub older_than: Option<String>,
    /// `oldest` (the default), `newest` or `deadline`.
    pub sort: Option<String>,
    /// [`Filter::search`].
    pub q: Option<String>,
    /// The page size (1 to [`MAX_PAGE`]).
    pub limit: Option<String>,
    /// Where the page starts, from a previous page's `next_cursor`.
    pub cursor: Option<String>,
}

/// A read [`TriageQuery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Triage {
    /// What to show.
    pub filter: Filter,
    /// How many at most, if the caller said.
    pub limit: Option<u32>,
    /// Where to start.
    pub cursor: Option<Cursor>,
}

impl TriageQuery {
    /// The filter, page size and cursor this query asks for.
    pub fn parse(&self) -> Result<Triage, TriageError> {
        let text =
            |value: &Option<String>| value.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
        let number = |name: &'static str, value: &Option<String>| -> Result<Option<u32>, TriageError> {
            text(value).map(|v| v.parse().map_err(|_| TriageError::Invalid { name, value: v })).transpose()
        };
        let sort = match text(&self.sort).as_deref() {
            None | Some("oldest") => Sort::Oldest,
            Some("newest") => Sort::Newest,
            Some("deadline") => Sort::Deadline,
            Some(other) => return Err(TriageError::Invalid { name: "sort", value: other.to_owned() }),
        };
        // The names are matched exactly against text columns, which hold no NUL (PostgreSQL's
        // text cannot): one asked for is no task's, and refused as such.
        let names = [("pool", &self.pool), ("tool", &self.tool), ("run", &self.run), ("sample", &self.sample)];
        if let Some((name, value)) =
            first_with_nul(names.map(|(name, value)| (name, value.as_deref().unwrap_or_default())))
        {
            return Err(TriageError::Invalid { name, value: value.replace('\0', "\\0") });
        }
        let limit = number("limit", &self.limit)?;
        if limit == Some(0) {
            return Err(TriageError::Invalid { name: "limit", value: "0".into() });
        }
        Ok(Triage {
            filter: Filter {
                pool: text(&self.pool),
                tool: text(&self.tool),
                run: text(&self.run),
                sample: text(&self.sample),
                older_than_minutes: number("older_than", &self.older_than)?,
                search: text(&self.q),
                sort,
            },
            limit: limit.map(|l| l.min(MAX_PAGE)),
            cursor: text(&self.cursor).map(|c| c.parse()).transpose()?,
        })
    }
}

/// Pending tasks of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCount {
    /// The pool.
    pub pool: String,
    /// How many of its tasks are pending.
    pub pending: u64,
}

/// One page of a filtered pending list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The tasks, in the filter's order.
    pub tasks: Vec<Task>,
    /// Where the next page starts, if there is one.
    pub next: Option<Cursor>,
    /// How many pending tasks match the filter, on every page.
    pub matching: u64,
    /// The pending tasks of each of the caller's pools (a pool with none too), whatever the
    /// filter.
    pub counts: Vec<PoolCount>,
}

impl Page {
    /// The pending tasks of all the caller's pools.
    pub fn pending(&self) -> u64 {
        self.counts.iter().map(|c| c.pending).sum()
    }
}

/// The columns a task is filtered on, read from its body when it is stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Columns {
    /// The called function's name.
    pub function: String,
    /// The eval run's id.
    pub run_id: String,
    /// The sample's id.
    pub sample_id: String,
    /// The rendered call and its arguments, lowercased, for [`Filter::search`].
    pub search: String,
}

impl Columns {
    /// The columns of `human`.
    pub fn of(human: &v1::HumanTask) -> Self {
        let request = human.task.as_ref().and_then(|t| t.request.as_ref());
        let key = request.and_then(|r| r.key.clone()).unwrap_or_default();
        let call = request.and_then(request_parts).and_then(|parts| parts.call);
        let search = call.map(|c| searchable(&format!("{}\n{}", call_line(c), c.arguments_json))).unwrap_or_default();
        Columns {
            function: call.map(|c| c.function.clone()).unwrap_or_default(),
            run_id: key.run_id,
            sample_id: key.sample_id,
            search,
        }
    }
}

/// Text as the search column keeps it: lowercased, with each NUL (which arguments may carry,
/// and PostgreSQL's text cannot) as U+FFFD; the task's body keeps the arguments as they came.
fn searchable(text: &str) -> String {
    text.to_lowercase().replace('\0', "\u{FFFD}")
}

/// A `LIKE` pattern matching `text` (as [`searchable`] keeps it) anywhere, its wildcards
/// escaped with `\`.
pub fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in searchable(text).chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &str) -> Result<Triage, TriageError> {
        serde_urlencoded::from_str::<TriageQuery>(pairs).unwrap().parse()
    }

    #[test]
    fn a_query_string_reads_back_as_it_was_written() {
        let filter = Filter {
            pool: Some("ops".into()),
            tool: Some("bash".into()),
            run: Some("run 1&2".into()),
            sample: Some("s=1".into()),
            older_than_minutes: Some(5),
            search: Some("rm -r /".into()),
            sort: Sort::Deadline,
        };
        let cursor = Cursor { key: 1_700_000_000_000, id: "0190-ab".into() };
        let read = query(&filter.query_string(Some(50), Some(&cursor))).unwrap();
        assert_eq!(read, Triage { filter, limit: Some(50), cursor: Some(cursor) });
        assert_eq!(Filter::default().query_string(None, None), "");
    }

    #[test]
    fn a_name_holding_a_nul_is_refused() {
        for name in ["pool", "tool", "run", "sample"] {
            let error = query(&format!("{name}=a%00b")).unwrap_err();
            assert_eq!(error.to_string(), format!("'a\\0b' is not a valid {name}"));
        }
        assert!(query("q=a%00b").is_ok(), "a search may look for one: arguments hold them");
    }

    #[test]
    fn empty_parameters_are_missing_ones_and_bad_ones_are_refused() {
        let read = query("pool=&tool=+&older_than=&sort=&q=&limit=&cursor=").unwrap();
        assert_eq!(read, Triage { filter: Filter::default(), limit: None, cursor: None });
        assert!(!read.filter.narrows());
        assert_eq!(query("limit=5000").unwrap().limit, Some(MAX_PAGE));
        for bad in ["sort=random", "limit=0", "limit=-1", "older_than=soon", "cursor=nodot", "cursor=x.y"] {
            assert!(query(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn search_patterns_match_wildcards_literally() {
        assert_eq!(contains_pattern("RM -R"), "%rm -r%");
        assert_eq!(contains_pattern("100%_\\x"), "%100\\%\\_\\\\x%");
    }
}

//! Standing decisions in the store: made, listed while active, revoked. Every process sharing
//! the store reads them from here when it applies them, so a revocation anywhere holds
//! everywhere from the next task on.

use std::str::FromStr;

use airlock_policy::{Decision, Kind};
use airlock_records::review::standing::{Scope, StandingDecision};
use airlock_records::review::{Caller, PolicyView};
use sqlx::{ColumnIndex, Decode, QueryBuilder, Row, Type};

use super::{Db, Store, StoreError, push_pools};

/// The columns a [`StandingDecision`] is read from (by name, in [`standing_from_row`]).
const STANDING_COLUMNS: &str = "id, author, pool, kind, step, scope, run_id, sample_id, requested_by, tenant, \
                                policy_name, policy_digest, pattern, decision, explanation, created_at, \
                                expires_at, revoked_at, revoked_by";

/// A standing decision before the store numbers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStanding {
    /// The reviewer who makes it.
    pub author: String,
    /// The pool whose tasks it decides.
    pub pool: String,
    /// The kind of task it decides.
    pub kind: Kind,
    /// The chain step whose tasks it decides.
    pub step: u32,
    /// Where it applies within the pool.
    pub scope: Scope,
    /// Whose calls it decides.
    pub caller: Caller,
    /// The policy the calls it decides are decided by.
    pub policy: Option<PolicyView>,
    /// The glob a call must match as a whole.
    pub pattern: String,
    /// What it answers.
    pub decision: Decision,
    /// The author's explanation.
    pub explanation: String,
    /// When it is made (unix ms).
    pub created_at: i64,
    /// When it stops applying (unix ms).
    pub expires_at: i64,
}

impl NewStanding {
    /// The standing decision it is once the store numbered it `id`: active, not revoked.
    pub fn numbered(&self, id: i64) -> StandingDecision {
        StandingDecision {
            id,
            author: self.author.clone(),
            pool: self.pool.clone(),
            kind: self.kind,
            step: self.step,
            scope: self.scope.clone(),
            caller: self.caller.clone(),
            policy: self.policy.clone(),
            pattern: self.pattern.clone(),
            decision: self.decision,
            explanation: self.explanation.clone(),
            created_at_unix_ms: self.created_at,
            expires_at_unix_ms: self.expires_at,
            revoked_at_unix_ms: None,
            revoked_by: None,
        }
    }
}

impl Store {
    /// Stores a new standing decision; it as stored, with its number.
    pub async fn add_standing(&self, new: &NewStanding) -> Result<StandingDecision, StoreError> {
        const SQL: &str = "INSERT INTO standing (author, pool, kind, step, scope, run_id, sample_id, requested_by, \
                           tenant, policy_name, policy_digest, pattern, decision, explanation, created_at, expires_at) \
                           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
                           RETURNING id";
        let (run_id, sample_id) = match &new.scope {
            Scope::Sample { run_id, sample_id } => (run_id.as_str(), sample_id.as_str()),
            Scope::Run { run_id } => (run_id.as_str(), ""),
            Scope::Pool => ("", ""),
        };
        let (id,): (i64,) = on_db!(self, pool => sqlx::query_as(SQL)
            .bind(&new.author)
            .bind(&new.pool)
            .bind(new.kind.to_string())
            .bind(i64::from(new.step))
            .bind(new.scope.kind().as_str())
            .bind(run_id)
            .bind(sample_id)
            .bind(&new.caller.requested_by)
            .bind(&new.caller.tenant)
            .bind(new.policy.as_ref().and_then(|policy| policy.name.as_deref()))
            .bind(new.policy.as_ref().map(|policy| policy.digest.as_str()))
            .bind(&new.pattern)
            .bind(new.decision.as_str())
            .bind(&new.explanation)
            .bind(new.created_at)
            .bind(new.expires_at)
            .fetch_one(pool)
            .await?);
        Ok(new.numbered(id))
    }

    /// The standing decisions of `pools` neither revoked nor expired at `now`, newest first.
    pub async fn active_standing(&self, pools: &[String], now: i64) -> Result<Vec<StandingDecision>, StoreError> {
        if pools.is_empty() {
            return Ok(Vec::new());
        }
        on_db!(self, pool => active_query(pools, now).build().fetch_all(pool).await?.iter().map(standing_from_row).collect())
    }

    /// One standing decision, active or not.
    pub async fn standing_decision(&self, id: i64) -> Result<Option<StandingDecision>, StoreError> {
        let sql = format!("SELECT {STANDING_COLUMNS} FROM standing WHERE id = $1");
        on_db!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(pool).await?;
            row.as_ref().map(standing_from_row).transpose()
        })
    }

    /// Revokes standing decision `id` as `by` at `now`, unless it was revoked before; whether
    /// this call revoked it.
    pub async fn revoke_standing(&self, id: i64, by: &str, now: i64) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE standing SET revoked_at = $2, revoked_by = $3 WHERE id = $1 AND revoked_at IS NULL";
        let revoked = on_db!(self, pool =>
            sqlx::query(SQL).bind(id).bind(now).bind(by).execute(pool).await?.rows_affected());
        Ok(revoked == 1)
    }
}

/// The query of the standing decisions of `pools` neither revoked nor expired at `now`, newest
/// first: run on the pool, or in a transaction (a task's insert reads those that cover it).
pub(super) fn active_query<DB: sqlx::Database>(pools: &[String], now: i64) -> QueryBuilder<DB>
where
    for<'a> String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let mut query = QueryBuilder::new(format!(
        "SELECT {STANDING_COLUMNS} FROM standing WHERE revoked_at IS NULL AND expires_at > "
    ));
    query.push_bind(now);
    push_pools(&mut query, Some(pools));
    query.push(" ORDER BY id DESC");
    query
}

/// Reads a standing decision from a row of [`STANDING_COLUMNS`], on either database.
pub(super) fn standing_from_row<'r, R>(row: &'r R) -> Result<StandingDecision, StoreError>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: i64 = row.try_get("id")?;
    let corrupt = |what: String| StoreError::Corrupt { id: format!("standing #{id}"), what };
    let kind: String = row.try_get("kind")?;
    let decision: String = row.try_get("decision")?;
    let (scope, run_id, sample_id): (String, String, String) =
        (row.try_get("scope")?, row.try_get("run_id")?, row.try_get("sample_id")?);
    let scope = match scope.as_str() {
        "sample" => Scope::Sample { run_id, sample_id },
        "run" => Scope::Run { run_id },
        "pool" => Scope::Pool,
        other => return Err(corrupt(format!("unknown scope '{other}'"))),
    };
    let step: i64 = row.try_get("step")?;
    // A task with a policy has a digest (empty when neither its request nor its task held
    // it); only a task without any is stored with none.
    let policy = row
        .try_get::<Option<String>, _>("policy_digest")?
        .map(|digest| Ok::<_, sqlx::Error>(PolicyView { name: row.try_get("policy_name")?, digest }))
        .transpose()?;
    Ok(StandingDecision {
        author: row.try_get("author")?,
        pool: row.try_get("pool")?,
        kind: Kind::from_str(&kind).map_err(|e| corrupt(format!("kind: {e}")))?,
        step: u32::try_from(step).map_err(|e| corrupt(format!("step: {e}")))?,
        scope,
        caller: Caller { requested_by: row.try_get("requested_by")?, tenant: row.try_get("tenant")? },
        policy,
        pattern: row.try_get("pattern")?,
        decision: Decision::from_str(&decision).map_err(|e| corrupt(format!("decision: {e}")))?,
        explanation: row.try_get("explanation")?,
        created_at_unix_ms: row.try_get("created_at")?,
        expires_at_unix_ms: row.try_get("expires_at")?,
        revoked_at_unix_ms: row.try_get("revoked_at")?,
        revoked_by: row.try_get("revoked_by")?,
        id,
    })
}

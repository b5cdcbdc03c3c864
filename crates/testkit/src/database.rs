//! Throwaway databases for tests of the services that store: a PostgreSQL database per test,
//! behind the same gate as the broker's, and a SQLite file in a fresh directory.

use airlock_tokens::random_hex;
use sqlx::Connection as _;
use sqlx::postgres::PgConnection;

/// The server tests use when `AIRLOCK_PG_URL` is unset (trust authentication, local).
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The URL of a database tests may create databases from.
pub fn pg_admin_url() -> String {
    std::env::var("AIRLOCK_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.to_owned())
}

/// A uniquely named database, created for one test and dropped by [`PgDatabase::drop_now`].
#[derive(Debug)]
pub struct PgDatabase {
    /// Its name.
    pub name: String,
    /// A URL that connects to it.
    pub url: String,
}

impl PgDatabase {
    /// Creates a fresh database, or `None` (the test skips) when there is no PostgreSQL
    /// server and `CI` is unset; with `CI` set, a missing server fails the test.
    pub async fn create(label: &str) -> Option<Self> {
        let admin = pg_admin_url();
        let mut conn = match PgConnection::connect(&admin).await {
            Ok(conn) => conn,
            Err(error) => {
                if std::env::var_os("CI").is_some() {
                    panic!("CI is set and PostgreSQL at AIRLOCK_PG_URL is unreachable: {error}");
                }
                eprintln!("skipping: no PostgreSQL at AIRLOCK_PG_URL ({error})");
                return None;
            }
        };
        let name = format!("airlock_{label}_{}", random_hex::<6>());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut conn)
            .await
            .expect("the test database can be created");
        let _ = conn.close().await;
        let base = admin.rsplit_once('/').map_or(admin.as_str(), |(base, _)| base);
        let url = format!("{base}/{name}");
        Some(PgDatabase { name, url })
    }

    /// Drops the database, closing whatever connections are left.
    pub async fn drop_now(self) {
        if let Ok(mut conn) = PgConnection::connect(&pg_admin_url()).await {
            let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
            let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
            let _ = conn.close().await;
        }
    }
}

/// Runs `body` with the URL of a fresh database, then drops the database whatever happened,
/// then passes any panic on. Skips (returns) when there is no server and `CI` is unset.
pub async fn with_pg<F, Fut>(label: &str, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let Some(db) = PgDatabase::create(label).await else { return };
    let outcome = tokio::spawn(body(db.url.clone())).await;
    db.drop_now().await;
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}

/// Runs `body` with the URL of a SQLite store in a fresh directory, then removes the directory.
pub async fn with_sqlite<F, Fut>(label: &str, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dir = std::env::temp_dir().join(format!("airlock-{label}-{}", random_hex::<6>()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    body(format!("sqlite:{}", dir.join("tasks.db").display())).await;
    let _ = std::fs::remove_dir_all(dir);
}

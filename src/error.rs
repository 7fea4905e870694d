//! The one error type of the pipeline, which answers the question that matters: retry or not.

use std::fmt;

/// What failed, and whether trying the same work again can succeed.
#[derive(Debug, thiserror::Error)]
pub struct Error {
    /// What Galewatch was doing, e.g. "writing a batch".
    context: std::borrow::Cow<'static, str>,
    kind: Kind,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A database error; `code` is the SQLSTATE when the server sent one; `closed` when the
    /// connection is lost or could not be made; `bug` when it is Galewatch's own mistake (a
    /// value it could not convert, a row or parameter count it did not expect).
    Database {
        code: Option<String>,
        closed: bool,
        bug: bool,
        /// A sharded database (Citus) could not reach a node holding some of the rows: the
        /// coordinator answers with an internal error (XX000) naming the lost connection.
        node_unreachable: bool,
    },
    /// The database did not answer within the configured time.
    Timeout,
    /// A change the operator asked for (in the settings) that Galewatch will not make by
    /// itself, because it cannot be made safely: the message says what to do instead. The
    /// command exits 2, as for a bad setting.
    Refused,
    /// Anything else (I/O at start, the metrics listener, a migration).
    Other,
}

impl Error {
    pub fn db(
        context: impl Into<std::borrow::Cow<'static, str>>,
        e: tokio_postgres::Error,
    ) -> Self {
        Error {
            context: context.into(),
            kind: Kind::Database {
                code: e.code().map(|c| c.code().to_string()),
                closed: lost_connection(&e),
                bug: client_mistake(&e),
                node_unreachable: node_unreachable(&e),
            },
            source: Some(Box::new(e)),
        }
    }

    pub fn timeout(context: &'static str) -> Self {
        Error {
            context: context.into(),
            kind: Kind::Timeout,
            source: None,
        }
    }

    pub fn other(
        context: &'static str,
        e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error {
            context: context.into(),
            kind: Kind::Other,
            source: Some(e.into()),
        }
    }

    /// A change Galewatch refuses to make (see [`Error::is_refusal`]).
    pub fn refused(context: &'static str, why: String) -> Self {
        Error {
            context: context.into(),
            kind: Kind::Refused,
            source: Some(why.into()),
        }
    }

    /// True when the settings ask for what cannot be done safely (a signal's type changed, a
    /// required signal removed): not retryable, and the command exits 2 naming it.
    pub fn is_refusal(&self) -> bool {
        self.kind == Kind::Refused
    }

    /// The SQLSTATE the server sent, if any.
    pub fn sqlstate(&self) -> Option<&str> {
        match &self.kind {
            Kind::Database { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// True when the same work may succeed if tried again (after a reconnect): the connection
    /// was lost or timed out, the server is shutting down or out of resources, or the transaction
    /// lost a serialization race or a deadlock. False for errors the data or the schema causes
    /// (SQLSTATE classes 22, 23, 42...), which the same batch would hit again.
    pub fn is_retryable(&self) -> bool {
        match &self.kind {
            Kind::Timeout => true,
            Kind::Other | Kind::Refused => false,
            Kind::Database {
                code: None, closed, ..
            } => *closed,
            Kind::Database {
                code: Some(code),
                closed,
                node_unreachable,
                ..
            } => {
                *closed
                    || *node_unreachable
                    || matches!(&code[..2], "08" | "40" | "53" | "57" | "58")
                    // 55000: "database is not currently accepting connections"; 55P03: lock timeout.
                    || code == "55000"
                    || code == "55P03"
            }
        }
    }

    /// True when the database refused the data itself (SQLSTATE class 22, data exception, or
    /// 23, integrity constraint violation): the same rows fail again, other rows need not.
    pub fn is_data_error(&self) -> bool {
        self.sqlstate()
            .is_some_and(|c| c.starts_with("22") || c.starts_with("23"))
    }

    /// True when what was written caused the error, so that other data need not hit it: a data
    /// exception or integrity violation (classes 22, 23), a program limit such as an index
    /// row too large (54), an error a trigger raised (P0: a plain `RAISE EXCEPTION` in an
    /// operator's trigger), or a value the client could not send (`is_bug`). A batch is split
    /// to find the piece that causes it; errors of the schema, rights or connection are not.
    pub fn is_caused_by_data(&self) -> bool {
        self.is_data_error()
            || self
                .sqlstate()
                .is_some_and(|c| c.starts_with("54") || c.starts_with("P0"))
            || self.is_bug()
    }

    /// True when the error is a bug in Galewatch rather than anything the database, the network
    /// or the data did: the client could not convert a value the server sent (or a parameter),
    /// or a query returned a number of rows or columns it cannot return. Retrying cannot help and
    /// reconnecting is not the cure; it is logged as an error to report.
    pub fn is_bug(&self) -> bool {
        matches!(self.kind, Kind::Database { bug: true, .. })
    }

    /// True when the connection must be dropped and made anew before the next try.
    pub fn needs_reconnect(&self) -> bool {
        match &self.kind {
            Kind::Timeout => true,
            Kind::Database { closed, code, .. } => {
                *closed
                    || code
                        .as_deref()
                        .is_some_and(|c| c.starts_with("08") || c.starts_with("57"))
            }
            Kind::Other | Kind::Refused => false,
        }
    }
}

/// Whether a client error means the connection is gone or never came up: the connection closed,
/// an I/O or TLS failure underneath, a connect timeout, or a reply the client could not follow.
/// tokio-postgres does not expose its error kinds, so the I/O source and its documented messages
/// are what tell these from conversion errors (`FromSql`, `ToSql`) and row-count mistakes.
/// Citus's words when a worker it needs is down or restarting (SQLSTATE XX000 or 08xxx): the
/// same batch commits once the node is back.
fn node_unreachable(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|d| {
        let m = d.message();
        m.contains("connection to the remote node")
            || m.contains("failure on connection marked as essential")
            || m.contains("could not establish any connections to the node")
    })
}

fn lost_connection(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if e.code().is_some() {
        return false;
    }
    let mut cur = std::error::Error::source(e);
    while let Some(s) = cur {
        if s.is::<std::io::Error>() {
            return true;
        }
        cur = s.source();
    }
    let text = e.to_string();
    [
        "error communicating with the server",
        "error connecting to server",
        "error performing TLS handshake",
        "timeout waiting for server",
        "connection closed",
        "unexpected message from server",
        "error parsing response from server",
    ]
    .iter()
    .any(|m| text.starts_with(m))
}

/// Whether a client error is the client's own: converting a value from or to SQL, or a query
/// answering with a row count or columns the code did not expect (tokio-postgres's documented
/// messages for its `FromSql`, `ToSql`, `RowCount`, `Column` and `Parameters` kinds).
fn client_mistake(e: &tokio_postgres::Error) -> bool {
    if e.code().is_some() || e.is_closed() {
        return false;
    }
    let text = e.to_string();
    [
        "error deserializing column",
        "error serializing parameter",
        "query returned an unexpected number of rows",
        "invalid column",
        "expected ",
    ]
    .iter()
    .any(|m| text.starts_with(m))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.context)?;
        match (&self.kind, &self.source) {
            (Kind::Timeout, _) => f.write_str(": timed out"),
            (
                Kind::Database {
                    code: Some(code), ..
                },
                Some(s),
            ) => {
                // tokio-postgres's Display says only "db error"; the source carries the message.
                let detail = s
                    .downcast_ref::<tokio_postgres::Error>()
                    .and_then(|e| e.as_db_error())
                    .map(|d| d.message().to_string())
                    .unwrap_or_else(|| s.to_string());
                write!(f, ": {detail} (SQLSTATE {code})")
            }
            (_, Some(s)) => {
                write!(f, ": {s}")?;
                let mut next = s.source();
                while let Some(inner) = next {
                    write!(f, ": {inner}")?;
                    next = inner.source();
                }
                Ok(())
            }
            (_, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_code(code: &str) -> Error {
        Error {
            context: "test".into(),
            kind: Kind::Database {
                code: Some(code.into()),
                closed: false,
                bug: false,
                node_unreachable: false,
            },
            source: None,
        }
    }

    #[test]
    fn an_unreachable_citus_worker_is_retryable_other_internal_errors_are_not() {
        let mut e = with_code("XX000");
        assert!(!e.is_retryable());
        if let Kind::Database {
            node_unreachable, ..
        } = &mut e.kind
        {
            *node_unreachable = true;
        }
        assert!(e.is_retryable());
        assert!(
            !e.is_data_error(),
            "never split and rejected reading by reading"
        );
    }

    #[test]
    fn retryable_by_sqlstate_class() {
        for code in ["08006", "40001", "40P01", "57P01", "53300", "55000"] {
            assert!(with_code(code).is_retryable(), "{code}");
        }
        for code in ["22003", "23505", "42P01", "42703"] {
            assert!(!with_code(code).is_retryable(), "{code}");
        }
        assert!(Error::timeout("x").is_retryable());
        assert!(Error::timeout("x").needs_reconnect());
        assert!(with_code("57P01").needs_reconnect());
        assert!(!with_code("40001").needs_reconnect());
        assert!(with_code("23514").is_data_error() && with_code("22003").is_data_error());
        assert!(!with_code("42P01").is_data_error() && !with_code("08006").is_data_error());
    }
}

//! The one error type of the pipeline, which answers the questions that matter: retry or not,
//! and whether a setting is to blame (the server refused who we said we are).

use std::fmt;

/// Why a server would not let Galewatch in, when it is who Galewatch said it is (a setting), not
/// the network or the server's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The database asks for a password and none was given (tokio-postgres's "password
    /// missing", before anything is sent).
    NoPassword,
    /// The database refused the password (SQLSTATE 28P01, invalid_password; a server that asks
    /// for a password answers so for a role it does not know, too).
    Password,
    /// The database refused the role itself (28000, invalid_authorization_specification): a role
    /// a server asking no password does not know, or no pg_hba.conf line that lets it in.
    Role,
    /// The broker: "bad user name or password" (CONNACK 0x86; MQTT 3.1.1's code 4).
    Login,
    /// The broker: "not authorized" (CONNACK 0x87; MQTT 3.1.1's code 5): no or other
    /// credentials needed, or this client id is not allowed.
    NotAuthorized,
}

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
        /// The server refused the credentials (see [`Refused`]).
        refused: Option<Refused>,
    },
    /// The broker refused the connection (its CONNACK), for the reason given when it is the
    /// credentials.
    Broker { refused: Option<Refused> },
    /// The database did not answer within the configured time.
    Timeout,
    /// A change the operator asked for (in the settings) that Galewatch will not make by
    /// itself, because it cannot be made safely: the message says what to do instead. The
    /// command exits 2, as for a bad setting.
    Refused,
    /// Anything else (I/O at start, the metrics listener, a migration).
    Other,
}

/// The context of a database error, on the result that carries it: `query(…).await.db("reading
/// the partition list")?`, one form for every statement's error.
pub(crate) trait DbContext<T> {
    fn db(self, context: impl Into<std::borrow::Cow<'static, str>>) -> Result<T, Error>;
}

impl<T> DbContext<T> for Result<T, tokio_postgres::Error> {
    fn db(self, context: impl Into<std::borrow::Cow<'static, str>>) -> Result<T, Error> {
        self.map_err(|e| Error::db(context, e))
    }
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
                refused: db_refused(&e),
            },
            source: Some(Box::new(e)),
        }
    }

    /// A broker connection that failed (the credentials refused, when [`broker_refused`] says
    /// so).
    pub fn broker(
        context: impl Into<std::borrow::Cow<'static, str>>,
        e: rumqttc::v5::ConnectionError,
    ) -> Self {
        Error {
            context: context.into(),
            kind: Kind::Broker {
                refused: broker_refused(&e),
            },
            source: Some(Box::new(e)),
        }
    }

    /// Puts `what` in front of the context: the setting to blame, or what the work was for.
    pub fn prefixed(mut self, what: impl std::fmt::Display) -> Self {
        self.context = format!("{what}: {}", self.context).into();
        self
    }

    /// Whether, and why, the server refused the credentials: a setting is wrong or missing, and
    /// trying again as the same will not get in.
    pub(crate) fn refused_credentials(&self) -> Option<Refused> {
        match &self.kind {
            Kind::Database { refused, .. } | Kind::Broker { refused } => *refused,
            _ => None,
        }
    }

    /// True when a setting cannot be used as it is, so the command exits 2 (and systemd does not
    /// restart it): a change Galewatch refuses to make, or credentials the server refused.
    pub fn is_setting_unusable(&self) -> bool {
        self.is_refusal() || self.refused_credentials().is_some()
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
    fn is_refusal(&self) -> bool {
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
            Kind::Broker { refused } => refused.is_none(),
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
    fn is_data_error(&self) -> bool {
        self.sqlstate()
            .is_some_and(|c| c.starts_with("22") || c.starts_with("23"))
    }

    /// True when what was written caused the error, so that other data need not hit it: a data
    /// exception or integrity violation (classes 22, 23), a program limit such as an index
    /// row too large (54), an error a trigger raised (P0: a plain `RAISE EXCEPTION` in an
    /// operator's trigger), or a value the client could not send (`is_bug`). A batch is split
    /// to find the piece that causes it; errors of the schema, rights or connection are not.
    pub(crate) fn is_caused_by_data(&self) -> bool {
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
            Kind::Other | Kind::Refused | Kind::Broker { .. } => false,
        }
    }
}

/// The broker's refusals of the credentials: its CONNACK's reason code.
pub(crate) fn broker_refused(e: &rumqttc::v5::ConnectionError) -> Option<Refused> {
    use rumqttc::v5::mqttbytes::v5::ConnectReturnCode as Code;
    match e {
        rumqttc::v5::ConnectionError::ConnectionRefused(Code::BadUserNamePassword) => {
            Some(Refused::Login)
        }
        rumqttc::v5::ConnectionError::ConnectionRefused(Code::NotAuthorized) => {
            Some(Refused::NotAuthorized)
        }
        _ => None,
    }
}

/// The database's refusals of the credentials: SQLSTATE class 28, or tokio-postgres's own
/// "password missing" (a configuration error it raises when the server asks for a password and
/// none is set; it exposes no kind, so its documented text tells it).
fn db_refused(e: &tokio_postgres::Error) -> Option<Refused> {
    match e.code().map(|c| c.code()) {
        Some("28P01") => Some(Refused::Password),
        Some("28000") => Some(Refused::Role),
        Some(_) => None,
        None => (e.to_string() == "invalid configuration"
            && std::error::Error::source(e).is_some_and(|s| s.to_string() == "password missing"))
        .then_some(Refused::NoPassword),
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
                refused: None,
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
    fn refused_credentials_are_an_unusable_setting_not_a_retry() {
        let mut e = with_code("28P01");
        if let Kind::Database { refused, .. } = &mut e.kind {
            *refused = Some(Refused::Password);
        }
        assert!(!e.is_retryable() && !e.needs_reconnect() && !e.is_caused_by_data());
        assert!(e.is_setting_unusable());
        assert_eq!(e.refused_credentials(), Some(Refused::Password));
        assert!(!with_code("08006").is_setting_unusable());
        assert!(Error::refused("x", "why".into()).is_setting_unusable());
        // The broker's CONNACK: its two refusals of the credentials, and the rest.
        use rumqttc::v5::mqttbytes::v5::ConnectReturnCode as Code;
        use rumqttc::v5::ConnectionError::ConnectionRefused;
        for (code, want) in [
            (Code::BadUserNamePassword, Some(Refused::Login)),
            (Code::NotAuthorized, Some(Refused::NotAuthorized)),
            (Code::ServerUnavailable, None),
            (Code::ServerBusy, None),
        ] {
            let e = Error::broker("connecting", ConnectionRefused(code));
            assert_eq!(e.refused_credentials(), want, "{code:?}");
            assert_eq!(e.is_setting_unusable(), want.is_some(), "{code:?}");
            assert_eq!(e.is_retryable(), want.is_none(), "{code:?}");
        }
        let e = Error::broker("connecting", ConnectionRefused(Code::NotAuthorized))
            .prefixed("invalid setting `mqtt_password`");
        assert_eq!(
            e.to_string(),
            "invalid setting `mqtt_password`: connecting: Connection refused, return code: `NotAuthorized`"
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

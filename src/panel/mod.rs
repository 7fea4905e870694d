//! Panel: `galewatch panel`, the engineers' read-only web view and JSON API, a separate process
//! from the ingest daemon so the daemon stays lean.
//!
//! Routes: `/` (the fleet), `/turbines/{id}` (three charts and the quarantine; an id with a
//! site, `A/07`, also unescaped), `/api/turbines`
//! and `/api/turbines/{id}/readings` (JSON), `/healthz`. Who may reach them: `access.rs`.

pub mod access;
pub mod auth;
pub mod chart;
pub mod data;
pub mod flight;
pub mod gate;
pub mod intervals;
pub mod listen;
pub mod page;
pub mod strip;
pub mod window;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio_util::sync::CancellationToken;

use crate::daemon::config::Config;
use crate::error::Error;
use data::{Db, Sort};
use window::{BadRequest, Params, Window};

/// Why a request failed: a status and a message, as JSON for the API and a page for a browser.
#[derive(Debug)]
struct Failure {
    status: StatusCode,
    message: String,
}

impl From<BadRequest> for Failure {
    fn from(b: BadRequest) -> Self {
        Failure {
            status: StatusCode::from_u16(b.status).unwrap_or(StatusCode::BAD_REQUEST),
            message: b.message,
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::from(Arc::new(e))
    }
}

/// A shared answer's error (see `flight.rs`).
impl From<Arc<Error>> for Failure {
    fn from(e: Arc<Error>) -> Self {
        tracing::warn!(error = %e, "panel request failed");
        Failure {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!("the database did not answer: {e}"),
        }
    }
}

fn not_found(id: &str) -> Failure {
    Failure {
        status: StatusCode::NOT_FOUND,
        message: format!("no turbine {id:?}: nothing was ever received from it"),
    }
}

/// A failure answered as JSON.
struct ApiFailure(Failure);

impl<F: Into<Failure>> From<F> for ApiFailure {
    fn from(f: F) -> Self {
        ApiFailure(f.into())
    }
}

impl IntoResponse for ApiFailure {
    fn into_response(self) -> Response {
        (
            self.0.status,
            Json(serde_json::json!({"error": self.0.message, "status": self.0.status.as_u16()})),
        )
            .into_response()
    }
}

/// A failure answered as a page.
struct PageFailure(Failure);

impl<F: Into<Failure>> From<F> for PageFailure {
    fn from(f: F) -> Self {
        PageFailure(f.into())
    }
}

impl IntoResponse for PageFailure {
    fn into_response(self) -> Response {
        (
            self.0.status,
            Html(page::error(self.0.status.as_u16(), &self.0.message)),
        )
            .into_response()
    }
}

/// A refusal answered as JSON for the API (`api`), as a page otherwise.
fn refusal(status: StatusCode, message: String, api: bool) -> Response {
    let f = Failure { status, message };
    if api {
        ApiFailure(f).into_response()
    } else {
        PageFailure(f).into_response()
    }
}

/// A page of the fleet and how many turbines match in all.
type FleetAnswer = Arc<(Vec<data::Status>, i64, data::FleetFigures)>;
/// One turbine's points and quarantined readings in a window.
type TurbineAnswer = Arc<(Vec<data::Point>, Vec<data::Quarantined>)>;

/// The database handle and the answers shared between identical requests (see `flight.rs`).
struct Panel {
    db: Db,
    /// When the HTTPS certificate stops being valid, if the panel serves HTTPS: `/healthz`
    /// warns in its last [`CERTIFICATE_WARNING`].
    certificate_expires: Option<std::time::SystemTime>,
    fleets: flight::Flights<(String, Sort, bool), FleetAnswer, Error>,
    series: flight::Flights<(String, Window), TurbineAnswer, Error>,
}

impl std::ops::Deref for Panel {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.db
    }
}

impl Panel {
    /// The fleet, shared with identical requests in the same second.
    async fn fleet(&self, p: &FleetParams) -> Result<FleetAnswer, Arc<Error>> {
        self.fleets
            .get((p.prefix.clone(), p.sort, p.desc), || async {
                self.db.fleet(&p.prefix, p.sort, p.desc).await.map(Arc::new)
            })
            .await
    }

    /// One turbine's points and quarantine in a window, shared likewise.
    async fn turbine(&self, id: &str, w: &Window) -> Result<TurbineAnswer, Arc<Error>> {
        self.series
            .get((id.to_string(), w.clone()), || async {
                let (points, q) =
                    tokio::try_join!(self.db.series(id, w), self.db.quarantine(id, w))?;
                Ok(Arc::new((points, q)))
            })
            .await
    }
}

type Shared = Arc<Panel>;

/// How long an answer is shared: the daemon commits every 100 ms or so, and a page a second old
/// is what an engineer sees anyway.
const SHARE_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// How long before its certificate expires the panel says so (at start, in `/healthz`).
const CERTIFICATE_WARNING: std::time::Duration = std::time::Duration::from_secs(14 * 86_400);

/// What to say of a certificate valid until `expires`, at `now`: None while more than
/// [`CERTIFICATE_WARNING`] is left.
fn certificate_warning(
    expires: std::time::SystemTime,
    now: std::time::SystemTime,
) -> Option<String> {
    let when = chrono::DateTime::<chrono::Utc>::from(expires).format("%Y-%m-%d %H:%M:%S UTC");
    match expires.duration_since(now) {
        Err(_) => Some(format!(
            "the panel's TLS certificate (panel_tls_cert_file) expired at {when}: browsers refuse it; renew it"
        )),
        Ok(left) if left <= CERTIFICATE_WARNING => Some(format!(
            "the panel's TLS certificate (panel_tls_cert_file) expires at {when}, in {:.1} days: renew it",
            left.as_secs_f64() / 86_400.0
        )),
        Ok(_) => None,
    }
}

/// The panel's routes over a database handle.
pub fn router(db: Db) -> Router {
    router_with(db, None)
}

/// [`router`], with the HTTPS certificate's expiry for `/healthz` to warn of.
fn router_with(db: Db, certificate_expires: Option<std::time::SystemTime>) -> Router {
    Router::new()
        .route("/", get(fleet_page))
        // The rest of the path: a turbine with a site (`A/07`) opens as `/turbines/A/07` and as
        // `/turbines/A%2F07`, which the fleet page links to.
        .route("/turbines/{*id}", get(turbine_page))
        .route("/api/turbines", get(fleet_api))
        .route("/api/turbines/{id}/readings", get(readings_api))
        .route("/api/turbines/{id}/power-curve", get(power_curve_api))
        .route("/api/turbines/{id}/wind-rose", get(wind_rose_api))
        .route("/healthz", get(healthz))
        // Under /api/ every answer is JSON, a path or a method the API does not have too.
        .route("/api/{*rest}", axum::routing::any(api_not_found))
        .route("/api", axum::routing::any(api_not_found))
        .method_not_allowed_fallback(not_allowed)
        .fallback(|| async {
            PageFailure(Failure {
                status: StatusCode::NOT_FOUND,
                message: "no such page".into(),
            })
        })
        .with_state(Arc::new(Panel {
            db,
            certificate_expires,
            fleets: flight::Flights::new(SHARE_FOR),
            series: flight::Flights::new(SHARE_FOR),
        }))
}

/// Serves the panel on `listener` until `shutdown` turns true, with the access its settings
/// give (a setting that cannot be used is a refusal: the command exits 2).
pub async fn serve(
    cfg: &Config,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let addr = listener
        .local_addr()
        .map_err(|e| Error::other("reading the panel's address", e))?;
    let access = access::Access::from_settings(&cfg.settings, addr)
        .map_err(|e| Error::refused("checking the panel's settings", e.to_string()))?;
    serve_with(cfg, access, listener, shutdown).await
}

/// Serves the panel on `listener` with `access` until `shutdown` turns true.
pub async fn serve_with(
    cfg: &Config,
    access: access::Access,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let db = Db::new(
        cfg.db.clone(),
        cfg.clock(),
        &cfg.rules.limits.signals,
        cfg.settings
            .stats
            .stats_enabled
            .then(|| (cfg.stats_sql(), cfg.settings.stats.stats_stuck_min_readings)),
        cfg.availability().map(|a| a.view),
        cfg.power_curve(),
    );
    let mut app = router_with(db, access.tls_expires);
    if let Some(auth) = access.auth {
        app = app.layer(axum::middleware::from_fn_with_state(auth, access::guard));
    }
    let app = app.into_make_service_with_connect_info::<listen::Peer>();
    let stop = async move {
        let _ = shutdown.cancelled().await;
    };
    let served = match access.tls {
        None => {
            let listener = listen::PlainListener::plain(listener)
                .map_err(|e| Error::other("reading the panel's address", e))?;
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
        }
        Some(tls) => {
            let listener = listen::TlsListener::tls(listener, tls)
                .map_err(|e| Error::other("reading the panel's address", e))?;
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
        }
    };
    served.map_err(|e| Error::other("serving the panel", e))
}

/// Binds `listen` and serves with `access` until shutdown.
pub async fn run(
    cfg: Config,
    listen: SocketAddr,
    access: access::Access,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    // Credentials the server refuses now would be refused on every request: a setting that
    // cannot be used, as for `run` (exit 2). A database not up yet is waited for: the pages
    // answer 503 until it is.
    if let Err(e) = cfg.db.open().await {
        if e.refused_credentials().is_some() {
            return Err(e);
        }
        tracing::warn!(error = %e, "the database does not answer yet; serving, with 503 until it does");
    }
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        Error::other(
            "binding the panel's address",
            format!("{listen} (panel_listen or --listen): {e}"),
        )
    })?;
    if let Some(why) = access
        .tls_expires
        .and_then(|t| certificate_warning(t, std::time::SystemTime::now()))
    {
        tracing::warn!("{why}");
    }
    let scheme = if access.tls.is_some() {
        "https"
    } else {
        "http"
    };
    tracing::info!(
        address = %format!("{scheme}://{listen}/"),
        access = %access.describe(),
        "panel serving"
    );
    serve_with(&cfg, access, listener, shutdown).await
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct FleetParams {
    prefix: String,
    sort: Sort,
    desc: bool,
}

/// What the panel needs to answer: the database. 200 `ok` when it answers a query within 2 s;
/// 503 saying what failed otherwise (a load balancer then stops sending requests here).
/// `/healthz` answers everyone, users or not: it says whether the database answers and nothing
/// of it (which database, where, as whom); the log says why, once a minute at most.
async fn healthz(State(db): State<Shared>) -> Response {
    static QUIET: std::sync::Mutex<Option<crate::backoff::Quiet>> = std::sync::Mutex::new(None);
    let warning = db
        .certificate_expires
        .and_then(|t| certificate_warning(t, std::time::SystemTime::now()))
        .map_or(String::new(), |w| format!("warning: {w}\n"));
    match db.ping().await {
        Ok(()) => (
            StatusCode::OK,
            format!("ok: the database answers\n{warning}"),
        )
            .into_response(),
        Err(e) => {
            let mut quiet = QUIET.lock().unwrap_or_else(|p| p.into_inner());
            let quiet = quiet.get_or_insert_with(|| {
                crate::backoff::Quiet::new(std::time::Duration::from_secs(60))
            });
            if quiet.due(std::time::Instant::now()) {
                tracing::warn!(error = %e, "/healthz: the database does not answer (logged once a minute at most)");
            }
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable: the database does not answer (the panel's log says why)\n",
            )
                .into_response()
        }
    }
}

type FleetQuery = Result<Query<FleetParams>, axum::extract::rejection::QueryRejection>;

/// The fleet's parameters, or a 400 naming what is wrong (`sort` must be one of the columns,
/// `desc` true or false).
fn fleet_params(p: FleetQuery) -> Result<FleetParams, Failure> {
    let p = fleet_query(p)?;
    // A prefix is the start of a turbine id: what no id holds is a bad request, not a query.
    if p.prefix.contains('\0') || p.prefix.len() > window::MAX_ID_BYTES {
        return Err(Failure {
            status: StatusCode::BAD_REQUEST,
            message: format!(
                "bad prefix: at most {} bytes, no NUL (a turbine id's start)",
                window::MAX_ID_BYTES
            ),
        });
    }
    Ok(p)
}

fn fleet_query(p: FleetQuery) -> Result<FleetParams, Failure> {
    p.map(|Query(p)| p).map_err(|e| Failure {
        status: StatusCode::BAD_REQUEST,
        message: format!(
            "bad query string: {} (sort: {}, deviation or its column's name curve, availability or avail; desc: true or false)",
            e.body_text(),
            Sort::ALL.map(Sort::as_str).join(", ")
        ),
    })
}

async fn fleet_page(State(db): State<Shared>, p: FleetQuery) -> Result<Html<String>, PageFailure> {
    let p = fleet_params(p)?;
    let fleet = db.fleet(&p).await?;
    let (rows, total, figures) = (&fleet.0, fleet.1, &fleet.2);
    let headline = db
        .queries
        .headline()
        .map_or_else(|| "latest".to_string(), |s| s.label());
    Ok(Html(page::fleet(
        rows, total, &p.prefix, p.sort, p.desc, &headline, figures,
    )))
}

async fn fleet_api(
    State(db): State<Shared>,
    p: FleetQuery,
) -> Result<Json<serde_json::Value>, ApiFailure> {
    let p = fleet_params(p)?;
    let fleet = db.fleet(&p).await?;
    // Each turbine's headline value under its signal's name (`power_kw` by default).
    let name = db.queries.headline().map(|s| s.name.clone());
    let turbines: Vec<serde_json::Value> = fleet
        .0
        .iter()
        .map(|t| {
            let mut v = serde_json::to_value(t).unwrap_or_default();
            if let (Some(o), Some(name)) = (v.as_object_mut(), &name) {
                o.insert(name.clone(), serde_json::json!(t.headline));
            }
            v
        })
        .collect();
    Ok(Json(
        serde_json::json!({"total": fleet.1, "turbines": turbines, "listed": fleet.2}),
    ))
}

type IdPath = Result<Path<String>, axum::extract::rejection::PathRejection>;

/// A turbine id from the path, or a 400 naming why not (not UTF-8 once percent-decoded), so
/// the API answers its own JSON error rather than axum's plain text.
fn path_id(p: IdPath) -> Result<String, Failure> {
    p.map(|Path(id)| id).map_err(|e| Failure {
        status: StatusCode::BAD_REQUEST,
        message: format!(
            "bad turbine id: {} (an id is UTF-8 text, 1 to {} bytes, no NUL)",
            e.body_text(),
            window::MAX_ID_BYTES
        ),
    })
}

/// A path under /api/ the API does not have: JSON, as every answer there.
async fn api_not_found(uri: axum::http::Uri) -> ApiFailure {
    ApiFailure(Failure {
        status: StatusCode::NOT_FOUND,
        message: format!(
            "no such API path {:?}: /api/turbines, /api/turbines/{{id}}/readings, /api/turbines/{{id}}/power-curve, /api/turbines/{{id}}/wind-rose",
            uri.path()
        ),
    })
}

/// A method a route does not take (the panel only reads): JSON under /api/, a page elsewhere.
async fn not_allowed(uri: axum::http::Uri) -> Response {
    let refused = refusal(
        StatusCode::METHOD_NOT_ALLOWED,
        "the panel only reads: GET (or HEAD)".into(),
        uri.path().starts_with("/api/"),
    );
    ([(header::ALLOW, "GET, HEAD")], refused).into_response()
}

/// Checks the id and the window; a query string axum cannot parse at all is a 400 too.
fn checked(
    id: &str,
    p: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
    stats: Option<crate::sink::stats::Width>,
) -> Result<(Params, Window), Failure> {
    window::check_id(id)?;
    let Query(p) = p.map_err(|e| Failure {
        status: StatusCode::BAD_REQUEST,
        message: format!("bad query string: {e}"),
    })?;
    // Whole seconds, so requests for "the last 24 hours" in the same second are one question.
    let now = chrono::SubsecRound::trunc_subsecs(chrono::Utc::now(), 0);
    let w = window::window(&p, now, stats.map(crate::sink::stats::Width::duration))?;
    Ok((p, w))
}

async fn readings_api(
    State(db): State<Shared>,
    id: IdPath,
    p: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiFailure> {
    let id = path_id(id)?;
    let (_, w) = checked(&id, p, db.queries.stats_width)?;
    let answer = db.turbine(&id, &w).await?;
    let (points, quarantined) = (&answer.0, &answer.1);
    if points.is_empty() && quarantined.is_empty() && !db.known(&id).await? {
        return Err(not_found(&id).into());
    }
    let body = page::readings_json(&id, &w, &db.queries, points, quarantined);
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(body)).into_response())
}

/// `/api/turbines/{id}/power-curve?from=&to=`: the range's bins, the reference, the deviation
/// and the bin filter's intervals (404 without a curve: the fleet declares no wind or power).
async fn power_curve_api(
    State(db): State<Shared>,
    id: IdPath,
    p: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiFailure> {
    let id = path_id(id)?;
    let (p, w) = checked(&id, p, db.queries.stats_width)?;
    let Some(c) = db.curve(&id, &w, p.turbulence()?).await? else {
        return Err(Failure {
            status: StatusCode::NOT_FOUND,
            message: "no power curve: the settings name no wind speed and power signal the fleet declares (power_curve_wind_signal, power_curve_power_signal), or statistics are off".into(),
        }
        .into());
    };
    // A turbine never heard from is a 404, as its readings and its page are.
    if c.intervals == 0 && !db.known(&id).await? {
        return Err(not_found(&id).into());
    }
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        Json(page::curve_json(&id, &w, &c)),
    )
        .into_response())
}

/// `/api/turbines/{id}/wind-rose?from=&to=&sectors=`: the range's intervals by direction sector
/// and speed class (404 without a direction signal: power_curve_direction_signal).
async fn wind_rose_api(
    State(db): State<Shared>,
    id: IdPath,
    p: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiFailure> {
    let id = path_id(id)?;
    let (p, w) = checked(&id, p, db.queries.stats_width)?;
    let Some(rose) = db.rose(&id, &w, p.rose_sectors()?).await? else {
        return Err(Failure {
            status: StatusCode::NOT_FOUND,
            message: "no wind rose: the settings name no direction signal (power_curve_direction_signal), or the fleet has no power curve, or statistics are off".into(),
        }
        .into());
    };
    if rose.total() == 0 && !db.known(&id).await? {
        return Err(not_found(&id).into());
    }
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        Json(page::iec::rose_json(&id, w.from, w.to, &rose)),
    )
        .into_response())
}

async fn turbine_page(
    State(db): State<Shared>,
    Path(id): Path<String>,
    p: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
) -> Result<Html<String>, PageFailure> {
    let (p, w) = checked(&id, p, db.queries.stats_width)?;
    let sectors = p.rose_sectors()?;
    let (points, quarantined, (status, _, _), changes, intervals, time, curve, notes, rose) = tokio::try_join!(
        db.db.series(&id, &w),
        db.db.quarantine(&id, &w),
        db.db.fleet(&id, Sort::Id, false),
        db.db.changes(&id, &w),
        db.db.intervals(&id, &w),
        db.db.time_by_category(&id, &w),
        db.db.curve(&id, &w, p.turbulence()?),
        db.db.annotations(&id, &w),
        db.db.rose(&id, &w, sectors)
    )?;
    let status = status.iter().find(|s| s.turbine_id == id);
    if points.is_empty() && quarantined.is_empty() && status.is_none() && !db.known(&id).await? {
        return Err(not_found(&id).into());
    }
    let preset = match (&p.from, &p.to, p.range.as_deref()) {
        (None, None, None) => Some("24h"),
        (None, None, Some(r)) => window::PRESETS
            .iter()
            .find(|(name, _)| *name == r)
            .map(|(name, _)| *name),
        _ => None,
    };
    Ok(Html(page::turbine(&page::TurbineView {
        id: &id,
        status,
        w: &w,
        preset,
        queries: &db.queries,
        points: &points,
        quarantined: &quarantined,
        changes: &changes,
        quality: db
            .db
            .stuck_min_readings()
            .zip(db.queries.stats_width)
            .map(|(k, width)| {
                // What the intervals shown cover (those starting in the range: from the first
                // boundary at or after its start to the end of the one holding its end), up to
                // now. An unaligned range counted from the boundary before its start and only to
                // its end: too many expected at one edge, too few at the other (over 100 %).
                let from = width.start_at_or_after(w.from);
                let to = width.start_at_or_after(w.to).min(chrono::Utc::now());
                let secs = i32::try_from((to - from).num_seconds().max(0)).unwrap_or(i32::MAX);
                let mut q = intervals::Quality::of(
                    &intervals,
                    (&db.queries.signals, &id),
                    k,
                    chrono::Duration::seconds(i64::from(width.secs())),
                    (db.db.stats_sql()).and_then(|s| s.periods.expected(&id, secs)),
                );
                q.annotate(
                    &db.queries.signals,
                    &notes,
                    crate::core::span::Span::new(w.from, w.to),
                );
                q
            }),
        availability: time.zip(db.db.availability_view().cloned()),
        strip: db.db.status_signal().map(|status| {
            let width = db.queries.stats_width.map_or(600, |w| i64::from(w.secs()));
            let step = w.step.map_or(width, |s| s.as_secs() as i64);
            let periods = db.db.stats_sql().map(|s| &s.periods);
            let now = chrono::Utc::now();
            let ivs: Vec<strip::Interval> = intervals
                .iter()
                .filter_map(|i| {
                    // The interval still filling expects only what its time so far holds.
                    let secs = (now - i.start).num_seconds().clamp(0, width) as i32;
                    Some(strip::Interval {
                        start: i.start,
                        counts: i.categories?,
                        missing: periods
                            .and_then(|p| p.expected(&id, secs))
                            .map_or(0.0, |e| (e - i.readings as f64).max(0.0)),
                    })
                })
                .collect();
            (status, strip::buckets(&ivs, width, step))
        }),
        derived: (db.db.stats_sql()).map_or_else(Vec::new, |sql| {
            intervals::derived_charts(sql, &intervals, &w)
        }),
        curve,
        rose,
    })))
}

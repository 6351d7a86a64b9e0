//! What the integration tests share: a sample window, and receivers of every protocol built
//! from the official definitions, listening on 127.0.0.1 and recording what they receive.

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flate2::Compression;
use flate2::write::GzEncoder;
use pmcpush::opentelemetry_proto::tonic::collector::profiles::v1development as collector;
use pmcpush::pprof::proto;
use pmcpush::sink::parca::proto as parca;
use pmcpush::{Backoff, Connection, PusherConfig, Resource, Target, Window, WindowMeta};
use prost::Message as _;
use tokio::sync::{Notify, oneshot};

/// The build ID of the sample's main binary.
pub const APP_BUILD_ID: &str = "4a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
/// The build ID of the sample's C library.
pub const LIBC_BUILD_ID: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

/// A window's profile as pmcstat writes one (gzipped pprof, link-time addresses, one mapping
/// per image with its build ID): `main → compute` 70 samples, `main → compute → memcpy` (in
/// libc) 25, `main` 5.
pub fn sample_pprof() -> Vec<u8> {
    let strings = [
        "",
        "samples",
        "count",
        "instructions",
        "main",
        "compute",
        "memcpy",
        "/usr/bin/app",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "app.c",
        APP_BUILD_ID,
        LIBC_BUILD_ID,
    ];
    let s = |name: &str| strings.iter().position(|x| *x == name).unwrap() as i64;
    let line = |function_id, line| proto::Line { function_id, line };
    let location = |id, mapping_id, address, lines| proto::Location {
        id,
        mapping_id,
        address,
        line: lines,
        is_folded: false,
    };
    let profile = proto::Profile {
        sample_type: vec![proto::ValueType { r#type: s("samples"), unit: s("count") }],
        sample: vec![
            proto::Sample { location_id: vec![2, 1], value: vec![70], label: vec![] },
            proto::Sample { location_id: vec![3, 2, 1], value: vec![25], label: vec![] },
            proto::Sample { location_id: vec![1], value: vec![5], label: vec![] },
        ],
        mapping: vec![
            proto::Mapping {
                id: 1,
                memory_start: 0x401000,
                memory_limit: 0x402000,
                file_offset: 0x1000,
                filename: s("/usr/bin/app"),
                build_id: s(APP_BUILD_ID),
                has_functions: true,
                ..Default::default()
            },
            proto::Mapping {
                id: 2,
                memory_start: 0x28000,
                memory_limit: 0x1bd000,
                file_offset: 0x28000,
                filename: s("/lib/x86_64-linux-gnu/libc.so.6"),
                build_id: s(LIBC_BUILD_ID),
                has_functions: true,
                ..Default::default()
            },
        ],
        location: vec![
            location(1, 1, 0x401136, vec![line(1, 12)]),
            location(2, 1, 0x401180, vec![line(2, 30)]),
            location(3, 2, 0x2a1f0, vec![line(3, 0)]),
        ],
        function: vec![
            proto::Function {
                id: 1,
                name: s("main"),
                system_name: s("main"),
                filename: s("app.c"),
                start_line: 10,
            },
            proto::Function {
                id: 2,
                name: s("compute"),
                system_name: s("compute"),
                filename: s("app.c"),
                start_line: 25,
            },
            proto::Function {
                id: 3,
                name: s("memcpy"),
                system_name: s("memcpy"),
                filename: 0,
                start_line: 0,
            },
        ],
        string_table: strings.iter().map(|s| s.to_string()).collect(),
        period_type: Some(proto::ValueType { r#type: s("instructions"), unit: s("count") }),
        period: 65536,
        ..Default::default()
    };
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&profile.encode_to_vec()).unwrap();
    gz.finish().unwrap()
}

/// The start of window `n` (10 s windows from a fixed time, so tests can check them).
pub fn window_start(n: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_750_000_000 + 10 * n)
}

/// Window `n` of the sample profile, for the service `db` on host `h1`, process 4242.
pub fn window(n: u64) -> Window {
    let start = window_start(n);
    let mut meta = WindowMeta::new(start, start + Duration::from_secs(10), "instructions", "db");
    meta.period = Some(65536);
    meta.resource = Resource::new("db")
        .with("host.name", "h1")
        .with("host.id", "0f1e2d3c4b5a69788796a5b4c3d2e1f0")
        .with("process.pid", 4242)
        .with("process.executable.name", "app")
        .with("thread.id", 4243)
        .with("thread.name", "worker")
        .with("container.id", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    meta.labels.push(("env".into(), "test".into()));
    Window::new(sample_pprof(), meta)
}

/// A pusher configuration with quick retries, for `target`.
pub fn quick_config(target: Target) -> PusherConfig {
    let mut config = PusherConfig::new(target);
    config.backoff = Backoff {
        initial: Duration::from_millis(5),
        max: Duration::from_millis(20),
        max_attempts: 3,
    };
    config.connection = Connection {
        request_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        ..Connection::default()
    };
    config
}

/// Waits until `done()` holds; a hang guard, not a timing assertion: the limit is far beyond
/// what any loopback exchange takes.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < limit, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A port on 127.0.0.1 that nothing listens on (it was free a moment ago).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// What a receiver answers, one entry per request (then `Accept` for the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Takes the request.
    Accept,
    /// Answers with this HTTP status (for gRPC receivers, a matching gRPC status).
    Status(u16),
    /// Waits until the test releases the receiver's gate, then takes the request.
    Stall,
    /// Takes the request but says (OTLP partial success) it refused this many profiles.
    Partial(i64),
}

/// The scripted answers and the gate of a receiver, shared with its handlers.
#[derive(Default)]
pub struct Script {
    answers: Mutex<VecDeque<Answer>>,
    gate: Notify,
    pub requests_seen: std::sync::atomic::AtomicU64,
}

impl Script {
    pub fn push(&self, answers: &[Answer]) {
        self.answers.lock().unwrap().extend(answers);
    }

    /// Lets every stalled request (and the next one that stalls) through.
    pub fn release(&self) {
        self.gate.notify_waiters();
        self.gate.notify_one();
    }

    /// The answer to the next request (the gate passed when it is `Stall`).
    async fn next(&self) -> Answer {
        self.requests_seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let answer = self.answers.lock().unwrap().pop_front().unwrap_or(Answer::Accept);
        if answer == Answer::Stall {
            self.gate.notified().await;
            return Answer::Accept;
        }
        answer
    }
}

/// A running receiver: its address, what it took, and how to stop it.
pub struct Receiver<T> {
    pub addr: SocketAddr,
    pub received: Arc<Mutex<Vec<T>>>,
    pub script: Arc<Script>,
    stop: Option<oneshot::Sender<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl<T> Receiver<T> {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    /// Stops listening and closes every connection.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shut();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

async fn listen(port: u16) -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap()
}

/// What a gRPC receiver records of a request: its metadata and message.
pub struct GrpcRequest<M> {
    pub metadata: tonic::metadata::MetadataMap,
    pub message: M,
}

fn grpc_status(code: u16) -> tonic::Status {
    match code {
        400 => tonic::Status::invalid_argument("refused by the test"),
        401 => tonic::Status::unauthenticated("refused by the test"),
        _ => tonic::Status::unavailable("down for the test"),
    }
}

/// The OTLP export response for `answer`: a partial success when it says so.
fn export_response(answer: Answer) -> collector::ExportProfilesServiceResponse {
    let partial_success = match answer {
        Answer::Partial(rejected) => Some(collector::ExportProfilesPartialSuccess {
            rejected_profiles: rejected,
            error_message: "sample type not supported by the test".into(),
        }),
        _ => None,
    };
    collector::ExportProfilesServiceResponse { partial_success }
}

/// An OTLP profiles gRPC receiver: the server `opentelemetry-proto` generates.
pub struct OtlpGrpcService {
    received: Arc<Mutex<Vec<GrpcRequest<collector::ExportProfilesServiceRequest>>>>,
    script: Arc<Script>,
}

#[tonic::async_trait]
impl collector::profiles_service_server::ProfilesService for OtlpGrpcService {
    async fn export(
        &self,
        request: tonic::Request<collector::ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<collector::ExportProfilesServiceResponse>, tonic::Status> {
        let answer = self.script.next().await;
        if let Answer::Status(code) = answer {
            return Err(grpc_status(code));
        }
        let metadata = request.metadata().clone();
        self.received.lock().unwrap().push(GrpcRequest { metadata, message: request.into_inner() });
        Ok(tonic::Response::new(export_response(answer)))
    }
}

pub fn otlp_grpc_receiver(
    port: u16,
) -> Receiver<GrpcRequest<collector::ExportProfilesServiceRequest>> {
    otlp_grpc_receiver_with(port, None)
}

/// [`otlp_grpc_receiver`], over TLS when `tls` is given.
pub fn otlp_grpc_receiver_with(
    port: u16,
    tls: Option<Identity>,
) -> Receiver<GrpcRequest<collector::ExportProfilesServiceRequest>> {
    let received = Arc::default();
    let script = Arc::new(Script::default());
    let service = OtlpGrpcService { received: Arc::clone(&received), script: Arc::clone(&script) };
    let server = collector::profiles_service_server::ProfilesServiceServer::new(service)
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    serve_grpc(port, received, script, tonic::service::Routes::new(server), tls)
}

/// A Parca `WriteRaw` receiver, from the service generated from Parca's definition.
pub struct ParcaService {
    received: Arc<Mutex<Vec<GrpcRequest<parca::WriteRawRequest>>>>,
    script: Arc<Script>,
}

#[tonic::async_trait]
impl parca::profile_store_service_server::ProfileStoreService for ParcaService {
    async fn write_raw(
        &self,
        request: tonic::Request<parca::WriteRawRequest>,
    ) -> Result<tonic::Response<parca::WriteRawResponse>, tonic::Status> {
        if let Answer::Status(code) = self.script.next().await {
            return Err(grpc_status(code));
        }
        let metadata = request.metadata().clone();
        self.received.lock().unwrap().push(GrpcRequest { metadata, message: request.into_inner() });
        Ok(tonic::Response::new(parca::WriteRawResponse {}))
    }
}

pub fn parca_receiver(port: u16) -> Receiver<GrpcRequest<parca::WriteRawRequest>> {
    let received = Arc::default();
    let script = Arc::new(Script::default());
    let service = ParcaService { received: Arc::clone(&received), script: Arc::clone(&script) };
    let server = parca::profile_store_service_server::ProfileStoreServiceServer::new(service);
    serve_grpc(port, received, script, tonic::service::Routes::new(server), None)
}

fn serve_grpc<T>(
    port: u16,
    received: Arc<Mutex<Vec<T>>>,
    script: Arc<Script>,
    routes: tonic::service::Routes,
    tls: Option<Identity>,
) -> Receiver<T> {
    let runtime = runtime();
    let listener = runtime.block_on(listen(port));
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let mut builder = tonic::transport::Server::builder();
    if let Some(identity) = tls {
        let identity = tonic::transport::Identity::from_pem(identity.cert_pem, identity.key_pem);
        builder = builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .unwrap();
    }
    runtime.spawn(async move {
        builder
            .add_routes(routes)
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                async {
                    let _ = stopped.await;
                },
            )
            .await
            .unwrap();
    });
    Receiver { addr, received, script, stop: Some(stop), runtime: Some(runtime) }
}

/// What an HTTP receiver records of a request.
#[derive(Clone, Debug)]
pub struct HttpRequest {
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// An HTTP receiver taking POSTs on `path` (axum), answering as scripted.
pub fn http_receiver(port: u16, path: &'static str) -> Receiver<HttpRequest> {
    http_receiver_with(port, path, None)
}

/// A server's certificate chain and key, PEM.
#[derive(Clone)]
pub struct Identity {
    pub cert_pem: String,
    pub key_pem: String,
}

/// [`http_receiver`], over TLS when `tls` is given.
pub fn http_receiver_with(
    port: u16,
    path: &'static str,
    tls: Option<Identity>,
) -> Receiver<HttpRequest> {
    use axum::extract::{RawQuery, State};
    use axum::http::{HeaderMap, StatusCode, Uri};

    type Shared = (Arc<Mutex<Vec<HttpRequest>>>, Arc<Script>);
    async fn handle(
        State((received, script)): State<Shared>,
        uri: Uri,
        RawQuery(query): RawQuery,
        headers: HeaderMap,
        body: axum::body::Bytes,
    ) -> (StatusCode, Vec<u8>) {
        let answer = script.next().await;
        if let Answer::Status(code) = answer {
            return (StatusCode::from_u16(code).unwrap(), Vec::new());
        }
        // The url crate's form decoding, as a server would read the query.
        let query = reqwest::Url::parse(&format!("http://receiver/?{}", query.unwrap_or_default()))
            .unwrap()
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let request =
            HttpRequest { path: uri.path().to_owned(), query, headers, body: body.to_vec() };
        received.lock().unwrap().push(request);
        // OTLP's answer; an HTTP receiver of another protocol answers with the same bytes,
        // which its clients do not read.
        (StatusCode::OK, export_response(answer).encode_to_vec())
    }

    let received: Arc<Mutex<Vec<HttpRequest>>> = Arc::default();
    let script = Arc::new(Script::default());
    let app = axum::Router::new()
        .route(path, axum::routing::post(handle))
        .with_state((Arc::clone(&received), Arc::clone(&script)));
    let runtime = runtime();
    let listener = runtime.block_on(listen(port));
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let stopped = async {
        let _ = stopped.await;
    };
    match tls {
        None => runtime.spawn(async move {
            axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap();
        }),
        Some(identity) => runtime.spawn(async move {
            let listener = TlsListener { tcp: listener, acceptor: tls_acceptor(&identity) };
            axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap();
        }),
    };
    Receiver { addr, received, script, stop: Some(stop), runtime: Some(runtime) }
}

/// A TLS acceptor (rustls, ring) presenting `identity`.
fn tls_acceptor(identity: &Identity) -> tokio_rustls::TlsAcceptor {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(identity.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key =
        rustls::pki_types::PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// A TCP listener whose connections are TLS: what axum serves HTTPS on.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else { continue };
            // A client that does not trust the certificate fails its handshake: next one.
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// What the tests check of an OTLP request, read back through its dictionary.
#[derive(Debug, PartialEq)]
pub struct OtlpSummary {
    /// Per profile: (sample type, unit) and the samples as `root;…;leaf` → value.
    pub profiles: Vec<((String, String), std::collections::BTreeMap<String, i64>)>,
    /// (file, start, limit, file offset, build ID) per mapping, the zero mapping left out.
    pub mappings: Vec<(String, u64, u64, u64, String)>,
    /// The resource attributes, as text.
    pub resource: std::collections::BTreeMap<String, String>,
    /// Per profile: start, duration, period type, period.
    pub times: Vec<(u64, u64, String, i64)>,
    /// The first profile's attributes (the window's labels).
    pub attributes: Vec<(String, String)>,
}

fn any_text(value: &Option<pmcpush::opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    use pmcpush::opentelemetry_proto::tonic::common::v1::any_value::Value;
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(n)) => n.to_string(),
        other => format!("{other:?}"),
    }
}

pub fn summarize(request: &collector::ExportProfilesServiceRequest) -> OtlpSummary {
    let dict = request.dictionary.as_ref().expect("a dictionary");
    let s = |i: i32| dict.string_table[i as usize].clone();
    let rp = &request.resource_profiles[0];
    let resource = rp
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|kv| (kv.key.clone(), any_text(&kv.value)))
        .collect();
    let profiles = &rp.scope_profiles[0].profiles;
    let summary = profiles
        .iter()
        .map(|p| {
            let t = p.sample_type.unwrap();
            let mut samples = std::collections::BTreeMap::new();
            for sample in &p.samples {
                let stack = &dict.stack_table[sample.stack_index as usize];
                let mut names: Vec<String> = stack
                    .location_indices
                    .iter()
                    .map(|&l| {
                        let location = &dict.location_table[l as usize];
                        s(dict.function_table[location.lines[0].function_index as usize]
                            .name_strindex)
                    })
                    .collect();
                names.reverse();
                *samples.entry(names.join(";")).or_insert(0) += sample.values[0];
            }
            ((s(t.type_strindex), s(t.unit_strindex)), samples)
        })
        .collect();
    let mappings = dict.mapping_table[1..]
        .iter()
        .map(|m| {
            let build_id = m
                .attribute_indices
                .iter()
                .map(|&i| &dict.attribute_table[i as usize])
                .find(|a| s(a.key_strindex) == pmcpush::otlp::BUILD_ID_ATTRIBUTE)
                .map(|a| any_text(&a.value))
                .unwrap_or_default();
            (s(m.filename_strindex), m.memory_start, m.memory_limit, m.file_offset, build_id)
        })
        .collect();
    let times = profiles
        .iter()
        .map(|p| {
            let pt = p.period_type.unwrap();
            (p.time_unix_nano, p.duration_nano, s(pt.type_strindex), p.period)
        })
        .collect();
    let attributes = profiles[0]
        .attribute_indices
        .iter()
        .map(|&i| {
            let a = &dict.attribute_table[i as usize];
            (s(a.key_strindex), any_text(&a.value))
        })
        .collect();
    OtlpSummary { profiles: summary, mappings, resource, times, attributes }
}

/// What the sample window must read as, once converted to OTLP, for window `n`.
pub fn expected_summary(n: u64) -> OtlpSummary {
    let start = window_start(n).duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let samples = [("main", 5), ("main;compute", 70), ("main;compute;memcpy", 25)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    let resource = [
        ("service.name", "db"),
        ("host.name", "h1"),
        ("host.id", "0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
        ("process.pid", "4242"),
        ("process.executable.name", "app"),
        ("thread.id", "4243"),
        ("thread.name", "worker"),
        ("container.id", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    OtlpSummary {
        profiles: vec![(("samples".into(), "count".into()), samples)],
        mappings: vec![
            ("/usr/bin/app".into(), 0x401000, 0x402000, 0x1000, APP_BUILD_ID.into()),
            (
                "/lib/x86_64-linux-gnu/libc.so.6".into(),
                0x28000,
                0x1bd000,
                0x28000,
                LIBC_BUILD_ID.into(),
            ),
        ],
        resource,
        times: vec![(start, 10_000_000_000, "instructions".into(), 65536)],
        attributes: vec![("env".into(), "test".into())],
    }
}

//! The principal each connection's requests run as, seen by a handler:
//! User:ANONYMOUS on PLAINTEXT and on TLS without a client certificate,
//! User:<subject DN> with one, the SASL user on SASL listeners (over TLS
//! too). Also: a SASL listener caps frames before authentication, and a
//! v0 SaslHandshake switches to bare SASL tokens.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, RequestHeader, RequestKind, ResponseHeader,
    ResponseKind, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use ottla_broker::handlers::{node_features, register_sasl, HandlerRegistry};
use ottla_broker::network::{
    HandlerFuture, ListenerSpec, RequestContext, RequestHandler, Response, Server, ServerSettings,
};
use ottla_broker::security::sasl::{Mechanism, SaslSettings, ScramCredentialStore};
use ottla_broker::security::tls::{ClientAuth, TlsSettings};
use ottla_broker::security::tls_reload::ReloadableTls;
use ottla_broker::security::ListenerSecurity;
use ottla_controller::scram::{ScramCredential, ScramMechanism};
use ottla_protocol::api_versions::VersionRange;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

#[global_allocator]
static ALLOC: ottla_allocator::NoReserveAllocator = ottla_allocator::NoReserveAllocator;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Answers Metadata with the request's principal as the cluster id.
struct WhoAmI;

impl RequestHandler for WhoAmI {
    fn handle<'a>(
        &'a self,
        ctx: &'a RequestContext,
        _header: RequestHeader,
        _body: RequestKind,
    ) -> HandlerFuture<'a> {
        Box::pin(async move {
            Ok(Response::Message(ResponseKind::Metadata(
                MetadataResponse::default()
                    .with_cluster_id(Some(StrBytes::from_string(ctx.principal.to_string()))),
            )))
        })
    }
}

struct NoScram;

impl ScramCredentialStore for NoScram {
    fn credential(&self, _: &str, _: ScramMechanism) -> Option<ScramCredential> {
        None
    }
}

/// A CA and a server certificate for 127.0.0.1, plus client certificates.
struct Pki {
    ca_params: CertificateParams,
    ca_key: KeyPair,
    ca_der: CertificateDer<'static>,
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "test CA");
        let ca_der = ca_params.self_signed(&ca_key).unwrap().der().clone();
        Self {
            ca_params,
            ca_key,
            ca_der,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// (chain, key) PEM text for `names` with subject `CN=<cn>,O=Acme`.
    fn issue(&self, names: &[&str], cn: &str) -> (CertificateDer<'static>, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Acme");
        params.distinguished_name.push(DnType::CommonName, cn);
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.der().clone(), key)
    }

    fn ca_pem(&self) -> String {
        let path = self.dir.path().join("ca.pem");
        let pem = self.ca_params.self_signed(&self.ca_key).unwrap().pem();
        std::fs::write(&path, &pem).unwrap();
        pem
    }

    /// A listener's TLS acceptor with a server certificate for 127.0.0.1.
    fn acceptor(&self, client_auth: ClientAuth) -> Arc<ReloadableTls> {
        Arc::new(ReloadableTls::new(self.tls(client_auth)).unwrap())
    }

    fn tls(&self, client_auth: ClientAuth) -> TlsSettings {
        let (cert, key) = self.issue(&["127.0.0.1"], "server");
        let keystore = self.dir.path().join("server.pem");
        let cert_pem = pem("CERTIFICATE", &cert);
        std::fs::write(&keystore, format!("{}{cert_pem}", key.serialize_pem())).unwrap();
        TlsSettings {
            keystore_type: "PEM".into(),
            keystore_location: Some(keystore.display().to_string()),
            keystore_certificate_chain: None,
            keystore_key: None,
            keystore_password: None,
            truststore_type: "PEM".into(),
            truststore_location: None,
            truststore_certificates: Some(self.ca_pem()),
            truststore_password: None,
            client_auth,
            enabled_protocols: vec!["TLSv1.2".into(), "TLSv1.3".into()],
        }
    }

    fn connector(&self, client_cn: Option<&str>) -> TlsConnector {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match client_cn {
            Some(cn) => {
                let (cert, key) = self.issue(&[], cn);
                let key = PrivateKeyDer::Pkcs8(key.serialize_der().into());
                builder.with_client_auth_cert(vec![cert], key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        TlsConnector::from(Arc::new(config))
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

fn sasl() -> Arc<SaslSettings> {
    Arc::new(SaslSettings {
        mechanisms: vec![Mechanism::Plain],
        plain_users: BTreeMap::from([("alice".to_string(), "secret".to_string())]),
        reauth_ms: 0,
        max_receive_size: 4096,
        credentials: Arc::new(NoScram),
    })
}

/// Serves one listener with `security`; returns its address.
async fn serve(security: ListenerSecurity) -> (SocketAddr, CancellationToken) {
    let mut registry =
        HandlerRegistry::new(node_features(ottla_broker::features::initial_finalized(0)));
    register_sasl(&mut registry).unwrap();
    let handler: Arc<dyn RequestHandler> = Arc::new(WhoAmI);
    registry
        .register(ApiKey::Metadata, VersionRange { min: 0, max: 12 }, handler)
        .unwrap();
    let spec = ListenerSpec {
        name: "TEST".into(),
        addr: "127.0.0.1:0".parse().unwrap(),
        api_versions: Arc::new(registry.api_versions().clone()),
        handler: Arc::new(registry),
        quorum: None,
        security,
    };
    let server = Server::bind(ServerSettings::default(), vec![spec])
        .await
        .unwrap();
    let addr = server.local_addrs()[0].1;
    let shutdown = CancellationToken::new();
    tokio::spawn(server.run(shutdown.clone()));
    (addr, shutdown)
}

/// Sends `req` and decodes the answer, over any stream.
async fn call<S, R>(stream: &mut S, version: i16, req: &R) -> R::Response
where
    S: AsyncRead + AsyncWrite + Unpin,
    R: Request,
{
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(7);
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header
        .encode(&mut frame, R::header_version(version))
        .unwrap();
    req.encode(&mut frame, version).unwrap();
    let len = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    stream.write_all(&frame).await.unwrap();
    let read = async {
        let size = stream.read_i32().await.unwrap();
        let mut buf = vec![0; size as usize];
        stream.read_exact(&mut buf).await.unwrap();
        Bytes::from(buf)
    };
    let mut reply = tokio::time::timeout(TIMEOUT, read)
        .await
        .expect("no answer");
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    ResponseHeader::decode(&mut reply, header_version).unwrap();
    let response = R::Response::decode(&mut reply, version).unwrap();
    assert!(!reply.has_remaining());
    response
}

async fn who_am_i<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) -> String {
    let response = call(stream, 12, &MetadataRequest::default()).await;
    response.cluster_id.unwrap().to_string()
}

async fn plain_login<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, password: &str) -> i16 {
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let answer: SaslHandshakeResponse = call(stream, 1, &handshake).await;
    assert_eq!(answer.error_code, 0);
    let token = Bytes::from(format!("\0alice\0{password}"));
    let answer: SaslAuthenticateResponse = call(
        stream,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(token),
    )
    .await;
    answer.error_code
}

fn server_name() -> ServerName<'static> {
    ServerName::try_from("127.0.0.1").unwrap()
}

#[tokio::test]
async fn plaintext_is_anonymous() {
    let (addr, _stop) = serve(ListenerSecurity::plaintext()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    assert_eq!(who_am_i(&mut stream).await, "User:ANONYMOUS");
}

#[tokio::test]
async fn tls_client_certificates_name_the_principal() {
    let pki = Pki::new();
    let security = ListenerSecurity {
        tls: Some(pki.acceptor(ClientAuth::Requested)),
        ..ListenerSecurity::plaintext()
    };
    let (addr, _stop) = serve(security).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut with_cert = pki
        .connector(Some("client-7"))
        .connect(server_name(), tcp)
        .await
        .unwrap();
    assert_eq!(who_am_i(&mut with_cert).await, "User:CN=client-7,O=Acme");
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut without = pki
        .connector(None)
        .connect(server_name(), tcp)
        .await
        .unwrap();
    assert_eq!(who_am_i(&mut without).await, "User:ANONYMOUS");
}

#[tokio::test]
async fn required_client_certificates_refuse_clients_without_one() {
    let pki = Pki::new();
    let security = ListenerSecurity {
        tls: Some(pki.acceptor(ClientAuth::Required)),
        ..ListenerSecurity::plaintext()
    };
    let (addr, _stop) = serve(security).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    // TLS 1.3 clients learn of the refusal on their first read.
    let refused = async {
        let mut stream = pki.connector(None).connect(server_name(), tcp).await?;
        stream.write_all(&[0, 0, 0, 0]).await?;
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await
    };
    assert!(tokio::time::timeout(TIMEOUT, refused)
        .await
        .unwrap()
        .is_err());
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut stream = pki
        .connector(Some("ok"))
        .connect(server_name(), tcp)
        .await
        .unwrap();
    assert_eq!(who_am_i(&mut stream).await, "User:CN=ok,O=Acme");
}

#[tokio::test]
async fn sasl_user_is_the_principal_even_over_tls() {
    let pki = Pki::new();
    let security = ListenerSecurity {
        tls: Some(pki.acceptor(ClientAuth::Requested)),
        sasl: Some(sasl()),
        ..ListenerSecurity::plaintext()
    };
    let (addr, _stop) = serve(security).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut stream = pki
        .connector(Some("cert-user"))
        .connect(server_name(), tcp)
        .await
        .unwrap();
    assert_eq!(plain_login(&mut stream, "secret").await, 0);
    assert_eq!(who_am_i(&mut stream).await, "User:alice");
}

#[tokio::test]
async fn sasl_frames_are_capped_before_authentication() {
    let security = ListenerSecurity {
        sasl: Some(sasl()),
        ..ListenerSecurity::plaintext()
    };
    let (addr, _stop) = serve(security).await;
    // A 1 MiB frame before authenticating closes the connection unread.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(&(1_i32 << 20).to_be_bytes())
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(TIMEOUT, stream.read(&mut byte))
        .await
        .unwrap();
    assert!(matches!(read, Ok(0) | Err(_)));
    // After logging in, the listener's normal cap applies.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    assert_eq!(plain_login(&mut stream, "secret").await, 0);
    let big = MetadataRequest::default().with_topics(Some(
        (0..400)
            .map(|i| {
                kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(kafka_protocol::messages::TopicName(
                        StrBytes::from_string(format!("topic-with-a-long-name-{i:04}")),
                    )))
            })
            .collect(),
    ));
    let response = call(&mut stream, 12, &big).await;
    assert_eq!(response.cluster_id.unwrap().as_str(), "User:alice");
}

#[tokio::test]
async fn v0_handshake_exchanges_bare_tokens() {
    let security = ListenerSecurity {
        sasl: Some(sasl()),
        ..ListenerSecurity::plaintext()
    };
    let (addr, _stop) = serve(security).await;
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    for (password, accepted) in [("secret", true), ("guess", false)] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let answer: SaslHandshakeResponse = call(&mut stream, 0, &handshake).await;
        assert_eq!(answer.error_code, 0);
        let token = format!("\0alice\0{password}");
        let mut frame = (token.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(token.as_bytes());
        stream.write_all(&frame).await.unwrap();
        let size = tokio::time::timeout(TIMEOUT, stream.read_i32())
            .await
            .unwrap();
        if accepted {
            // PLAIN's answer is an empty bare token.
            assert_eq!(size.unwrap(), 0);
            assert_eq!(who_am_i(&mut stream).await, "User:alice");
        } else {
            // A failed bare exchange closes without an answer, as in Kafka.
            assert!(size.is_err());
        }
    }
}

//! One registration per API: [`served_apis!`] declares a listener's Kafka
//! APIs, each once, with its versions, its authorization gate and its
//! handler, and expands to what each of those needs, so no API can be
//! advertised, authorized or dispatched without the other two:
//! - `SERVED`: key and versions, registered with the listener's
//!   [`HandlerRegistry`](super::HandlerRegistry), which answers ApiVersions;
//! - `gate`: the request as the requester may send it (see
//!   [`crate::authorize`]);
//! - `run`: the request handed to its handler.

/// Declares the served APIs. The header names the bindings the entries use:
///
/// ```text
/// with (target: Type, call: Type, version, listener, request; access, args);
/// Key min..=max, gate <expr>, run <expr>;
/// ```
///
/// In both expressions `request` is the typed request and `version` the
/// request's version; a gate also sees `access` (an `&Arc<Access>`) and
/// `args` (`&GateArgs`) and gives a [`Gate`](crate::authorize::Gate); a run
/// sees `target`, `call` and `listener` (the listener's name, owned) and
/// gives the typed response, inside an async function returning
/// `anyhow::Result<Option<ResponseKind>>` (so `?` works, and `return
/// Ok(None)` sends no response).
macro_rules! served_apis {
    (
        with ($target:ident: $target_ty:ty, $call:ident: $call_ty:ty, $version:ident,
              $listener:ident, $request:ident; $access:ident, $args:ident);
        $( $kind:ident $min:literal ..= $max:literal, gate $gate:expr, run $run:expr; )*
    ) => {
        /// The versions served, from Kafka 4.x's floors (KIP-896) to what
        /// the handlers implement.
        pub const SERVED: &[(::kafka_protocol::messages::ApiKey, i16, i16)] =
            &[$((::kafka_protocol::messages::ApiKey::$kind, $min, $max)),*];

        /// The authorization gate of a request to this listener.
        pub(crate) fn gate(
            $access: &::std::sync::Arc<$crate::security::authorizer::Access>,
            $args: &$crate::authorize::GateArgs,
            body: ::kafka_protocol::messages::RequestKind,
        ) -> $crate::authorize::Gate {
            let $version = $args.version;
            match body {
                $(::kafka_protocol::messages::RequestKind::$kind($request) => $gate,)*
                _ => $crate::authorize::Gate::NoRule,
            }
        }

        /// Hands a request to its handler. `call` and `listener` are
        /// offered to every entry; a table may have no use for one.
        async fn run(
            $target: $target_ty,
            #[allow(unused_variables)] $call: $call_ty,
            $version: i16,
            #[allow(unused_variables)] $listener: String,
            body: ::kafka_protocol::messages::RequestKind,
        ) -> ::anyhow::Result<Option<::kafka_protocol::messages::ResponseKind>> {
            match body {
                $(::kafka_protocol::messages::RequestKind::$kind($request) => {
                    Ok(Some(::kafka_protocol::messages::ResponseKind::$kind($run)))
                })*
                other => ::anyhow::bail!(
                    "no handler registered for {:?}",
                    ::std::mem::discriminant(&other)
                ),
            }
        }
    };
}
pub(crate) use served_apis;

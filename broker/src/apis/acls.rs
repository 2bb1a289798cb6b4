//! CreateAcls, DescribeAcls and DeleteAcls (v1-3), as `kafka-acls.sh` uses
//! them. ACLs are metadata records; without an authorizer the APIs answer
//! SECURITY_DISABLED, as Kafka does.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::{AclCreation, CreateAclsRequest};
use kafka_protocol::messages::create_acls_response::{AclCreationResult, CreateAclsResponse};
use kafka_protocol::messages::delete_acls_request::{DeleteAclsFilter, DeleteAclsRequest};
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse,
};
use kafka_protocol::messages::describe_acls_request::DescribeAclsRequest;
use kafka_protocol::messages::describe_acls_response::{
    AclDescription, DescribeAclsResource, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::{Acl, AclFilter};
use ottla_controller::ControllerError;

use crate::broker::Broker;

const NO_AUTHORIZER: &str = "No authorizer is configured: set authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

fn enabled(broker: &Broker) -> bool {
    broker.settings.authorizer.is_some()
}

fn error_of(r: &Result<impl Sized, ControllerError>) -> (i16, Option<StrBytes>) {
    match r {
        Ok(_) => (0, None),
        Err(e) => (e.code, Some(text(e.message.clone()))),
    }
}

fn acl_of(c: &AclCreation) -> Acl {
    Acl {
        resource_type: c.resource_type,
        resource_name: c.resource_name.to_string(),
        pattern_type: c.resource_pattern_type,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: c.operation,
        permission: c.permission_type,
    }
}

pub fn create(broker: &Broker, _version: i16, req: CreateAclsRequest) -> CreateAclsResponse {
    let results: Vec<Result<(), ControllerError>> = if enabled(broker) {
        let acls: Vec<Acl> = req.creations.iter().map(acl_of).collect();
        broker
            .controller
            .block_on(broker.controller.create_acls(&acls))
    } else {
        req.creations
            .iter()
            .map(|_| {
                Err(ControllerError::new(
                    ResponseError::SecurityDisabled,
                    NO_AUTHORIZER,
                ))
            })
            .collect()
    };
    CreateAclsResponse::default().with_results(
        results
            .iter()
            .map(|r| {
                let (code, message) = error_of(r);
                AclCreationResult::default()
                    .with_error_code(code)
                    .with_error_message(message)
            })
            .collect(),
    )
}

/// A request filter as the controller's, `None` strings matching anything.
fn filter(
    resource_type: i8,
    name: &Option<StrBytes>,
    pattern_type: i8,
    principal: &Option<StrBytes>,
    host: &Option<StrBytes>,
    operation: i8,
    permission: i8,
) -> AclFilter {
    let owned = |s: &Option<StrBytes>| s.as_ref().map(|s| s.to_string());
    AclFilter {
        resource_type,
        resource_name: owned(name),
        pattern_type,
        principal: owned(principal),
        host: owned(host),
        operation,
        permission,
    }
}

pub fn describe(broker: &Broker, _version: i16, req: DescribeAclsRequest) -> DescribeAclsResponse {
    let fail = |e: ControllerError| {
        DescribeAclsResponse::default()
            .with_error_code(e.code)
            .with_error_message(Some(text(e.message)))
    };
    if !enabled(broker) {
        return fail(ControllerError::new(
            ResponseError::SecurityDisabled,
            NO_AUTHORIZER,
        ));
    }
    let f = filter(
        req.resource_type_filter,
        &req.resource_name_filter,
        req.pattern_type_filter,
        &req.principal_filter,
        &req.host_filter,
        req.operation,
        req.permission_type,
    );
    if let Err(e) = f.validate() {
        return fail(e);
    }
    let image = broker.controller.image();
    let mut by_resource: BTreeMap<(i8, &str, i8), Vec<AclDescription>> = BTreeMap::new();
    for acl in image.acls.values().filter(|a| f.matches(a)) {
        by_resource
            .entry((acl.resource_type, &acl.resource_name, acl.pattern_type))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(text(acl.principal.clone()))
                    .with_host(text(acl.host.clone()))
                    .with_operation(acl.operation)
                    .with_permission_type(acl.permission),
            );
    }
    DescribeAclsResponse::default().with_resources(
        by_resource
            .into_iter()
            .map(|((t, name, p), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(t)
                    .with_resource_name(text(name))
                    .with_pattern_type(p)
                    .with_acls(acls)
            })
            .collect(),
    )
}

fn delete_filter(f: &DeleteAclsFilter) -> AclFilter {
    filter(
        f.resource_type_filter,
        &f.resource_name_filter,
        f.pattern_type_filter,
        &f.principal_filter,
        &f.host_filter,
        f.operation,
        f.permission_type,
    )
}

pub fn delete(broker: &Broker, _version: i16, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let results = if enabled(broker) {
        let filters: Vec<AclFilter> = req.filters.iter().map(delete_filter).collect();
        broker
            .controller
            .block_on(broker.controller.delete_acls(&filters))
    } else {
        req.filters
            .iter()
            .map(|_| {
                Err(ControllerError::new(
                    ResponseError::SecurityDisabled,
                    NO_AUTHORIZER,
                ))
            })
            .collect()
    };
    DeleteAclsResponse::default().with_filter_results(
        results
            .into_iter()
            .map(|r| {
                let (code, message) = error_of(&r);
                let matching = r
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(_, acl)| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(acl.resource_type)
                            .with_resource_name(text(acl.resource_name))
                            .with_pattern_type(acl.pattern_type)
                            .with_principal(text(acl.principal))
                            .with_host(text(acl.host))
                            .with_operation(acl.operation)
                            .with_permission_type(acl.permission)
                    })
                    .collect();
                DeleteAclsFilterResult::default()
                    .with_error_code(code)
                    .with_error_message(message)
                    .with_matching_acls(matching)
            })
            .collect(),
    )
}

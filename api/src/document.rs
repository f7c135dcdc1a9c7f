//! The OpenAPI document, generated from the handlers and completed with what the derive cannot
//! say: that `delay_ms` and `scheduled_at` exclude each other, that a schedule has exactly one
//! of `cron` and `every_secs`, that a misfire policy has no fields besides its own, the
//! `?wait=` grammar, and who must authenticate.
//!
//! The document describes the server that serves it. With users configured every operation
//! that answers 401 states `bearer` or `basic` as its security requirement; with none (which
//! `deck serve` allows on loopback only) no operation needs credentials, so the document
//! states no security at all and lists no 401 responses. `contract/run.sh` holds the server
//! to this document with schemathesis.

use std::sync::OnceLock;

use utoipa::openapi::OpenApi;
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder,
    Schema, Type,
};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{RefOr, path::Operation};

use super::limits::WAIT_PATTERN;

/// The document as served, for a server with (`credentials_required`) or without users, and
/// with the document itself public (`[auth] public_openapi`) or not.
pub fn served(credentials_required: bool, openapi_public: bool) -> &'static str {
    static SECURED: OnceLock<String> = OnceLock::new();
    static SECURED_PUBLIC_DOC: OnceLock<String> = OnceLock::new();
    static OPEN: OnceLock<String> = OnceLock::new();
    let cell = match (credentials_required, openapi_public) {
        (true, false) => &SECURED,
        (true, true) => &SECURED_PUBLIC_DOC,
        (false, _) => &OPEN,
    };
    cell.get_or_init(|| {
        // Serializing plain data structures cannot fail; an empty object would still be JSON.
        serde_json::to_string(&document(credentials_required, openapi_public))
            .unwrap_or_else(|_| "{}".into())
    })
}

/// The document for a server with or without users.
pub fn document(credentials_required: bool, openapi_public: bool) -> OpenApi {
    let mut doc = super::routes().split_for_parts().1;
    schedule_or_delay(&mut doc);
    wait_pattern(&mut doc);
    non_empty_patch(&mut doc);
    one_timing(&mut doc);
    closed_misfire(&mut doc);
    if credentials_required {
        if openapi_public {
            public_document(&mut doc);
        }
        require_credentials(&mut doc);
    } else {
        drop_unauthorized(&mut doc);
    }
    doc
}

/// With `[auth] public_openapi` the document answers anyone: it never says 401.
fn public_document(doc: &mut OpenApi) {
    let path = format!("{}/openapi.json", super::PREFIX);
    if let Some(op) = doc.paths.paths.get_mut(&path).and_then(|i| i.get.as_mut()) {
        op.responses.responses.remove("401");
    }
}

fn operations(doc: &mut OpenApi) -> impl Iterator<Item = &mut Operation> {
    doc.paths.paths.values_mut().flat_map(|item| {
        [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
    })
}

/// Operations that can answer 401 need credentials: a bearer token or basic auth.
fn require_credentials(doc: &mut OpenApi) {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    components.add_security_scheme(
        "basic",
        SecurityScheme::Http(Http::new(HttpAuthScheme::Basic)),
    );
    for op in operations(doc) {
        if op.responses.responses.contains_key("401") {
            op.security = Some(vec![
                SecurityRequirement::new("bearer", Vec::<String>::new()),
                SecurityRequirement::new("basic", Vec::<String>::new()),
            ]);
        }
    }
}

/// Without users every caller is the local operator: no request is ever refused with 401.
fn drop_unauthorized(doc: &mut OpenApi) {
    for op in operations(doc) {
        op.responses.responses.remove("401");
    }
}

/// `?wait=` takes what `parse_wait` takes (`IntoParams` wants the pattern as a literal; this
/// keeps it in one place).
fn wait_pattern(doc: &mut OpenApi) {
    for op in operations(doc) {
        let params = op.parameters.iter_mut().flatten();
        for param in params.filter(|p| p.name == "wait") {
            if let Some(RefOr::T(Schema::Object(schema))) = param.schema.as_mut() {
                schema.pattern = Some(WAIT_PATTERN.to_string());
            }
        }
    }
}

/// A queue patch changes at least one thing (utoipa's `min_properties` attribute writes
/// `maxProperties`, so it is set here).
fn non_empty_patch(doc: &mut OpenApi) {
    let patch = doc
        .components
        .as_mut()
        .and_then(|c| c.schemas.get_mut("QueuePatch"));
    if let Some(RefOr::T(Schema::Object(patch))) = patch {
        patch.min_properties = Some(1);
    }
}

/// `EnqueueJob` becomes "all its fields, and `delay_ms` or `scheduled_at` null or absent, and
/// a uniqueness window only with a key, its states only with a window".
/// (JSON Schema's `not` would say the same; utoipa's model has no `not`, and `anyOf` keeps the
/// document within what it can build.)
fn schedule_or_delay(doc: &mut OpenApi) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let Some(job) = components.schemas.remove("EnqueueJob") else {
        return;
    };
    let unset = |field: &str| -> RefOr<Schema> {
        ObjectBuilder::new()
            .property(field, ObjectBuilder::new().schema_type(Type::Null))
            .into()
    };
    let exclusive = AnyOfBuilder::new()
        .item(unset("delay_ms"))
        .item(unset("scheduled_at"))
        .description(Some(
            "`delay_ms` and `scheduled_at` exclude each other: give one or neither.",
        ));
    // A uniqueness window needs a key, and states need a window.
    let keyed_window = AnyOfBuilder::new()
        .item(unset("unique_for_ms"))
        .item(
            ObjectBuilder::new()
                .property(
                    "idempotency_key",
                    ObjectBuilder::new().schema_type(Type::String),
                )
                .required("idempotency_key"),
        )
        .description(Some("`unique_for_ms` needs an `idempotency_key`."));
    let states_need_window = AnyOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .property(
                    "unique_for_ms",
                    ObjectBuilder::new().schema_type(Type::Integer),
                )
                .required("unique_for_ms"),
        )
        .item(
            ObjectBuilder::new().property(
                "unique_states",
                ArrayBuilder::new()
                    .items(ObjectBuilder::new())
                    .max_items(Some(0)),
            ),
        )
        .description(Some("`unique_states` needs `unique_for_ms`."));
    let wrapped = AllOfBuilder::new()
        .item(job)
        .item(exclusive)
        .item(keyed_window)
        .item(states_need_window);
    components.schemas.insert(
        "EnqueueJob".to_string(),
        Schema::AllOf(wrapped.build()).into(),
    );
}

/// A schedule's timing is `cron` or `every_secs`: exactly one of them given and not `null`, in
/// what clients send and in what they read back.
fn one_timing(doc: &mut OpenApi) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let given = |field: &str, kind: Type| -> RefOr<Schema> {
        ObjectBuilder::new()
            .property(field, ObjectBuilder::new().schema_type(kind))
            .required(field)
            .into()
    };
    for name in ["NewSchedule", "ScheduleEdit", "Schedule"] {
        let Some(schedule) = components.schemas.remove(name) else {
            continue;
        };
        let exactly_one = OneOfBuilder::new()
            .item(given("cron", Type::String))
            .item(given("every_secs", Type::Integer))
            .description(Some(
                "Exactly one of `cron` and `every_secs` is given (the other absent or `null`).",
            ));
        let wrapped = AllOfBuilder::new().item(schedule).item(exactly_one);
        components
            .schemas
            .insert(name.to_string(), Schema::AllOf(wrapped.build()).into());
    }
}

/// Each misfire policy is its own closed object: `cap` belongs to `run_all` alone (the derive
/// leaves the variants open; the server refuses other fields).
fn closed_misfire(doc: &mut OpenApi) {
    let misfire = doc
        .components
        .as_mut()
        .and_then(|c| c.schemas.get_mut("Misfire"));
    if let Some(RefOr::T(Schema::OneOf(policies))) = misfire {
        for policy in policies.items.iter_mut() {
            if let RefOr::T(Schema::Object(policy)) = policy {
                policy.additional_properties =
                    Some(Box::new(AdditionalProperties::FreeForm(false)));
            }
        }
    }
}

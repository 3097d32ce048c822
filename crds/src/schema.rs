//! Schemas written here instead of derived, where the derived one would show Kubernetes' Go
//! documentation to users (`kubectl explain`) instead of what the field means.

/// A timestamp field (`Option<Time>`): RFC 3339 text. The field's own doc comment is its
/// description; the derived schema would carry the Go type's ("Time is a wrapper around time.Time").
pub fn timestamp(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "format": "date-time", "nullable": true })
}

/// What a resource quantity is, for users: replaces the description k8s-openapi copies from the Go
/// type (its serialization grammar and Go accessors) wherever it appears in a schema.
pub const QUANTITY_DESCRIPTION: &str = "A quantity: a number with an optional suffix, binary (Ki, Mi, Gi, Ti, \
     Pi, Ei), decimal (m, k, M, G, T, P, E) or an exponent (e3), e.g. 500m CPU or 256Mi memory.";

/// The start of the Go type's description of a quantity.
const GO_QUANTITY_DESCRIPTION: &str = "Quantity is a fixed-point representation of a number.";

/// Replaces the Go documentation of embedded Kubernetes types in a CRD rendered as JSON (see
/// [`QUANTITY_DESCRIPTION`]).
pub fn describe_for_users(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::String(d)) = map.get_mut("description")
                && d.starts_with(GO_QUANTITY_DESCRIPTION)
            {
                *d = QUANTITY_DESCRIPTION.to_string();
            }
            map.values_mut().for_each(describe_for_users);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(describe_for_users),
        _ => {}
    }
}

// Package strexpr is the string-valued field connectors take in ArkFlow's
// shape: `{type: value, value: "orders"}` for a constant, or
// `{type: expr, expr: 'this.user_id'}` for an expression evaluated per
// message (the expression language of the mapping processor: `this` is
// the message's value, `meta` its metadata fields). A plain string is
// accepted as a constant too.
//
// An expression that does not compile in that language (ArkFlow's are
// SQL, `concat('lamp:', device)`) is compiled as an SQL expression over
// the message as a one-row table named flow (internal/sqlengine): the
// fields of its JSON object as columns, or __value__ and the __meta_*
// columns for another payload.
//
// Connectors use it for Redis keys, Kafka keys and partitions, NATS
// subjects, MQTT topics and object paths.
package strexpr

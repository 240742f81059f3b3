// Package mongodb holds the mongodb output: each message, a JSON object,
// becomes one document of a MongoDB collection (go.mongodb.org/mongo-driver/v2),
// inserted or upserted by key in one ordered bulk operation per batch.
//
// It must not log or return a connection URI with its credentials: errors
// and logs name the servers only (see redactURI and scrubber).
package mongodb

// Package redis holds the Redis input, output and temporary table in
// ArkFlow's shape (go-redis): lists, pub/sub, hashes, strings and streams.
package redis

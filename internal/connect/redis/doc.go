// Package redis: Redis input, output and temporary table in ArkFlow's shape: lists, pub/sub, hashes, strings and streams (go-redis).
package redis

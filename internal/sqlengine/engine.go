package sqlengine

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
)

// Engine runs queries; it is safe for concurrent use.
type Engine struct{}

// New returns an engine.
func New() (*Engine, error) { return &Engine{}, nil }

// Check reports, without tables, whether query is one read-only statement
// (SELECT or WITH ... SELECT) that parses.
func (e *Engine) Check(query string) error { return errors.New("sqlengine: not implemented yet") }

// Query runs query with each table registered under its name and returns
// the result as a table (zero rows with the result's columns when nothing
// matched).
func (e *Engine) Query(ctx context.Context, query string, tables map[string]arrow.RecordBatch) (arrow.RecordBatch, error) {
	return nil, errors.New("sqlengine: not implemented yet")
}

// Close releases the engine's connections.
func (e *Engine) Close() error { return nil }

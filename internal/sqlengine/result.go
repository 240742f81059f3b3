package sqlengine

import (
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flowplane/flowplane/internal/columnar"
)

// buildResult reads rows into an Arrow table. A column's type comes from
// its declared type when it projects a table column unchanged (SQLite
// reports it), else from its values: all integers -> int64, any real ->
// float64, any text -> utf8, any blob -> binary; a column of nulls only
// is utf8.
func buildResult(rows *sql.Rows) (arrow.RecordBatch, error) {
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	cols := make([][]any, len(names))
	dest := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range dest {
		ptrs[i] = &dest[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		for i, v := range dest {
			cols[i] = append(cols[i], v) // Scan copied a []byte
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	fields := make([]arrow.Field, len(names))
	arrs := make([]arrow.Array, len(names))
	for i, name := range names {
		f, a := buildColumn(name, types[i].DatabaseTypeName(), cols[i])
		fields[i], arrs[i] = f, a
	}
	n := int64(0)
	if len(cols) > 0 {
		n = int64(len(cols[0]))
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, n), nil
}

type kinds struct{ ints, reals, texts, blobs, nulls int }

func kindsOf(vals []any) kinds {
	var k kinds
	for _, v := range vals {
		switch v.(type) {
		case nil:
			k.nulls++
		case int64:
			k.ints++
		case float64:
			k.reals++
		case string:
			k.texts++
		default:
			k.blobs++
		}
	}
	return k
}

func buildColumn(name, decl string, vals []any) (arrow.Field, arrow.Array) {
	k := kindsOf(vals)
	onlyInts := k.reals+k.texts+k.blobs == 0
	onlyTexts := k.ints+k.reals+k.blobs == 0
	f := arrow.Field{Name: name, Nullable: true}
	switch {
	case decl == declBool && onlyInts:
		f.Type = arrow.FixedWidthTypes.Boolean
	case decl == declTime && onlyInts:
		f.Type = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	case decl == declUint && onlyInts && allNonNegative(vals):
		f.Type = arrow.PrimitiveTypes.Uint64
	case decl == declJSON && onlyTexts:
		f.Type = arrow.BinaryTypes.String
		f.Metadata = arrow.NewMetadata([]string{columnar.JSONKey}, []string{"true"})
	case k.blobs > 0:
		f.Type = arrow.BinaryTypes.Binary
	case k.texts > 0:
		f.Type = arrow.BinaryTypes.String
	case k.reals > 0:
		f.Type = arrow.PrimitiveTypes.Float64
	case k.ints > 0:
		f.Type = arrow.PrimitiveTypes.Int64
	default: // nulls only, or no rows: the declared type when there is one
		f.Type = typeOfDecl(decl)
	}
	b := array.NewBuilder(memory.DefaultAllocator, f.Type)
	defer b.Release()
	b.Reserve(len(vals))
	for _, v := range vals {
		if v == nil {
			b.AppendNull()
			continue
		}
		switch b := b.(type) {
		case *array.BooleanBuilder:
			b.Append(v.(int64) != 0)
		case *array.TimestampBuilder:
			b.Append(arrow.Timestamp(v.(int64)))
		case *array.Uint64Builder:
			b.Append(uint64(v.(int64)))
		case *array.Int64Builder:
			b.Append(v.(int64))
		case *array.Float64Builder:
			switch x := v.(type) {
			case int64:
				b.Append(float64(x))
			case float64:
				b.Append(x)
			}
		case *array.StringBuilder:
			b.Append(text(v))
		case *array.BinaryBuilder:
			if x, ok := v.([]byte); ok {
				b.Append(x)
			} else {
				b.AppendString(text(v))
			}
		}
	}
	return f, b.NewArray()
}

func allNonNegative(vals []any) bool {
	for _, v := range vals {
		if x, ok := v.(int64); ok && x < 0 {
			return false
		}
	}
	return true
}

func typeOfDecl(decl string) arrow.DataType {
	switch decl {
	case declInt:
		return arrow.PrimitiveTypes.Int64
	case declUint:
		return arrow.PrimitiveTypes.Uint64
	case declReal:
		return arrow.PrimitiveTypes.Float64
	case declBool:
		return arrow.FixedWidthTypes.Boolean
	case declBlob:
		return arrow.BinaryTypes.Binary
	case declTime:
		return &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	}
	return arrow.BinaryTypes.String
}

// text formats an SQLite value as SQLite's CAST(x AS TEXT) would.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

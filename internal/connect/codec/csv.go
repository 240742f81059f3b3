package codec

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flowplane/flowplane/internal/columnar"
	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterCodec(component.Spec{
		Name: "csv",
		Summary: "Decodes CSV payloads into a table (each payload holds records, the first naming the columns " +
			"when header is true; a column is int64, float64 or bool when every value parses so, else utf8); " +
			"encodes a batch as one CSV payload, header line first when header is true.",
		Schema: component.ObjectSchema(map[string]any{
			"delimiter": component.Prop("string", "The field separator, one character.", ","),
			"header": component.Prop("boolean", "The first record of each payload names the columns (decode), "+
				"and encoded payloads start with the column names. When false, columns are named column_1, "+
				"column_2, ...", true),
		}),
		Example: "type: csv\ndelimiter: \";\"\nheader: true\n",
	}, NewCSV)
}

var (
	_ component.Codec    = (*CSV)(nil)
	_ component.Columnar = (*CSV)(nil)
)

// CSV is the csv codec.
type CSV struct {
	comma  rune
	header bool
}

// NewCSV builds the csv codec.
func NewCSV(conf map[string]any, _ component.Resources) (component.Codec, error) {
	c := struct {
		Delimiter string `json:"delimiter"`
		Header    *bool  `json:"header"`
	}{Delimiter: ","}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	r, n := utf8.DecodeRuneInString(c.Delimiter)
	if n == 0 || n != len(c.Delimiter) || r == utf8.RuneError || r == '"' || r == '\r' || r == '\n' {
		return nil, fmt.Errorf("delimiter: want one character other than a quote or line end, got %q", c.Delimiter)
	}
	return &CSV{comma: r, header: c.Header == nil || *c.Header}, nil
}

// Columnar: Encode reads tables.
func (*CSV) Columnar() {}

// Decode parses each payload's records into rows.
func (c *CSV) Decode(_ context.Context, b message.Batch) (message.Batch, error) {
	payloads, err := payloadsOf(b, columnar.ValueField)
	if err != nil {
		return message.Batch{}, err
	}
	rec, src, err := c.decode(payloads)
	if err != nil {
		return message.Batch{}, err
	}
	if rec, err = withMeta(rec, b, src); err != nil {
		return message.Batch{}, err
	}
	return message.Batch{Table: rec}, nil
}

// decode returns the table of payloads' records and, for each row, the
// index of its payload.
func (c *CSV) decode(payloads [][]byte) (arrow.RecordBatch, []int, error) {
	var (
		src   []int
		names []string // columns in order of first appearance
		index = map[string]int{}
		rows  [][]string // cells by column index; missing cells stay ""
		set   [][]bool   // which cells a record had
	)
	for pi, p := range payloads {
		r := csv.NewReader(bytes.NewReader(p))
		r.Comma = c.comma
		r.FieldsPerRecord = -1
		var cols []int // column index of each field of this payload
		first := true
		for {
			fields, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, nil, fmt.Errorf("payload %d: %w", pi, err)
			}
			if first && c.header {
				first = false
				cols = make([]int, len(fields))
				for i, name := range fields {
					if _, dup := slicesIndex(fields[:i], name); dup {
						return nil, nil, fmt.Errorf("payload %d: column %q named twice in the header", pi, name)
					}
					j, ok := index[name]
					if !ok {
						j = len(names)
						index[name] = j
						names = append(names, name)
					}
					cols[i] = j
				}
				continue
			}
			first = false
			if c.header && len(fields) > len(cols) {
				return nil, nil, fmt.Errorf("payload %d: record with %d fields, the header names %d", pi, len(fields), len(cols))
			}
			row := make([]string, 0, len(names))
			has := make([]bool, 0, len(names))
			for i, v := range fields {
				j := i
				if c.header {
					j = cols[i]
				} else if j >= len(names) {
					name := "column_" + strconv.Itoa(j+1)
					index[name] = j
					names = append(names, name)
				}
				for len(row) <= j {
					row, has = append(row, ""), append(has, false)
				}
				row[j], has[j] = v, true
			}
			rows, set, src = append(rows, row), append(set, has), append(src, pi)
		}
	}
	var t tableBuilder
	conv := make([]func(string) (any, bool), len(names))
	for j, name := range names {
		typ, f := inferCSV(rows, set, j)
		conv[j] = f
		if _, err := t.column(colDef{name: name, typ: typ}); err != nil {
			return nil, nil, err
		}
	}
	for r, row := range rows {
		vals := make([]any, len(names))
		for j := range names {
			if j < len(row) && set[r][j] {
				vals[j], _ = conv[j](row[j])
			}
		}
		t.add(vals)
	}
	rec, err := t.build()
	return rec, src, err
}

func slicesIndex(s []string, v string) (int, bool) {
	for i, x := range s {
		if x == v {
			return i, true
		}
	}
	return -1, false
}

// csvKinds are the types a CSV column may take, tried in order: the first
// that parses every non-empty value of the column wins. An empty value is
// null in a typed column.
var csvKinds = []struct {
	typ   arrow.DataType
	parse func(string) (any, bool)
}{
	{arrow.PrimitiveTypes.Int64, func(s string) (any, bool) {
		v, err := strconv.ParseInt(s, 10, 64)
		return v, err == nil
	}},
	{arrow.PrimitiveTypes.Float64, func(s string) (any, bool) {
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}},
	{arrow.FixedWidthTypes.Boolean, func(s string) (any, bool) {
		switch s {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		return nil, false
	}},
}

// inferCSV returns column j's type and the conversion of its cells.
func inferCSV(rows [][]string, set [][]bool, j int) (arrow.DataType, func(string) (any, bool)) {
	for _, k := range csvKinds {
		seen, all := false, true
		for r, row := range rows {
			if j >= len(row) || !set[r][j] || row[j] == "" {
				continue
			}
			seen = true
			if _, ok := k.parse(row[j]); !ok {
				all = false
				break
			}
		}
		if seen && all {
			parse := k.parse
			return k.typ, func(s string) (any, bool) {
				if s == "" {
					return nil, true
				}
				return parse(s)
			}
		}
	}
	return arrow.BinaryTypes.String, func(s string) (any, bool) { return s, true }
}

// Encode writes the batch's rows (a table, or messages holding JSON
// objects) as one CSV payload.
func (c *CSV) Encode(_ context.Context, b message.Batch) (message.Batch, error) {
	rec, err := tableOf(b)
	if err != nil {
		return message.Batch{}, err
	}
	p, err := c.encode(rec)
	if err != nil {
		return message.Batch{}, err
	}
	return message.Batch{Messages: []message.Message{message.New(p)}}, nil
}

func (c *CSV) encode(rec arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Comma = c.comma
	var cols []int // every column but the __meta_* ones
	for i := range int(rec.NumCols()) {
		if !strings.HasPrefix(rec.ColumnName(i), columnar.MetaPrefix) {
			cols = append(cols, i)
		}
	}
	if c.header {
		names := make([]string, len(cols))
		for k, i := range cols {
			names[k] = rec.ColumnName(i)
		}
		if err := w.Write(names); err != nil {
			return nil, err
		}
	}
	row := make([]string, len(cols))
	for r := range int(rec.NumRows()) {
		for k, i := range cols {
			v, err := cell(rec, i, r)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
			}
			if row[k], err = csvCell(v, isJSONField(rec.Schema().Field(i))); err != nil {
				return nil, fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
			}
		}
		if err := w.Write(row); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// csvCell formats one value: null as empty, bytes as base64, JSON
// columns as JSON text.
func csvCell(v any, isJSON bool) (string, error) {
	if isJSON && v != nil {
		b, err := json.Marshal(v)
		return string(b), err
	}
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case []byte:
		return base64.StdEncoding.EncodeToString(v), nil
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

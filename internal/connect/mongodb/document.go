package mongodb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// toDocument converts one JSON object into a BSON document, keeping the
// order of its fields. Integers that fit int64 become int64, every other
// number a double; null stays null, objects become documents and arrays
// arrays. A key given twice keeps its first position and its last value,
// as encoding/json keeps the last value.
func toDocument(payload []byte) (bson.D, error) {
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	tok, err := d.Token()
	if err == io.EOF {
		return nil, errors.New("the payload is empty, not a JSON object")
	}
	if err != nil {
		return nil, fmt.Errorf("the payload is not valid JSON: %w", err)
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return nil, fmt.Errorf("the payload is a JSON %s, not an object: a MongoDB document must be an object", kindOf(tok))
	}
	doc, err := readObject(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("the payload is not valid JSON: data after the object")
	}
	return doc, nil
}

// kindOf names the JSON type of the first token of a value.
func kindOf(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	default:
		return "null"
	}
}

// readObject reads the members of an object whose '{' was read.
func readObject(d *json.Decoder) (bson.D, error) {
	doc := bson.D{}
	var index map[string]int // built only when an object is large
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("the payload is not valid JSON: %w", err)
		}
		key := tok.(string) // the decoder guarantees a string key here
		if strings.IndexByte(key, 0) >= 0 {
			return nil, fmt.Errorf("field name %q holds a NUL byte, which BSON cannot store", key)
		}
		v, err := readValue(d)
		if err != nil {
			return nil, err
		}
		i := -1
		if len(doc) > 16 && index == nil {
			index = make(map[string]int, len(doc)*2)
			for j, e := range doc {
				index[e.Key] = j
			}
		}
		if index != nil {
			if j, ok := index[key]; ok {
				i = j
			}
		} else {
			for j := range doc {
				if doc[j].Key == key {
					i = j
					break
				}
			}
		}
		if i >= 0 {
			doc[i].Value = v
			continue
		}
		if index != nil {
			index[key] = len(doc)
		}
		doc = append(doc, bson.E{Key: key, Value: v})
	}
	if _, err := d.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("the payload is not valid JSON: %w", err)
	}
	return doc, nil
}

// readValue reads one JSON value.
func readValue(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, fmt.Errorf("the payload is not valid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return readObject(d)
		}
		arr := bson.A{}
		for d.More() {
			v, err := readValue(d)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := d.Token(); err != nil { // the closing ']'
			return nil, fmt.Errorf("the payload is not valid JSON: %w", err)
		}
		return arr, nil
	case json.Number:
		return number(t)
	default: // string, bool, nil
		return t, nil
	}
}

// number converts a JSON number: an integer literal that fits int64 is an
// int64, anything else a double. A number too large for a double is an
// error rather than an infinity.
func number(n json.Number) (any, error) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %s is out of the range of a double", s)
	}
	return f, nil
}

// lookup finds the value at a dotted path (a.b.c) in doc.
func lookup(doc bson.D, path string) (any, bool) {
	var cur any = doc
	for part := range strings.SplitSeq(path, ".") {
		d, ok := cur.(bson.D)
		if !ok {
			return nil, false
		}
		found := false
		for _, e := range d {
			if e.Key == part {
				cur, found = e.Value, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return cur, true
}

// keyFilter is the filter of an upsert: each key field equal to its value
// in doc. A key that is missing, null or an array is an error: null would
// also match documents without the field, and an array would match
// documents whose array merely contains it.
func keyFilter(doc bson.D, keys []string) (bson.D, error) {
	f := make(bson.D, 0, len(keys))
	for _, k := range keys {
		v, ok := lookup(doc, k)
		switch {
		case !ok:
			return nil, fmt.Errorf("key field %q is missing", k)
		case v == nil:
			return nil, fmt.Errorf("key field %q is null", k)
		}
		if _, isArr := v.(bson.A); isArr {
			return nil, fmt.Errorf("key field %q is an array; a key must be a scalar or an object", k)
		}
		f = append(f, bson.E{Key: k, Value: v})
	}
	return f, nil
}

// upsertModel replaces the document whose key fields equal doc's, or
// inserts doc when there is none.
func upsertModel(doc bson.D, keys []string) (*mongo.ReplaceOneModel, error) {
	f, err := keyFilter(doc, keys)
	if err != nil {
		return nil, err
	}
	return mongo.NewReplaceOneModel().SetFilter(f).SetReplacement(doc).SetUpsert(true), nil
}

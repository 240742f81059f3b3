package config

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// Default returns the configuration with every default applied and no
// streams or jobs.
func Default() *Config {
	c, err := decode(withDefaults(map[string]any{"streams": []any{}}))
	if err != nil {
		panic("config: defaults do not decode: " + err.Error())
	}
	return c
}

// DefaultRestartStrategy is the restart strategy of a job that declares
// none.
func DefaultRestartStrategy() *RestartStrategy {
	var rs RestartStrategy
	raw, err := json.Marshal(fill(reflect.TypeFor[RestartStrategy](), map[string]any{}))
	if err == nil {
		err = json.Unmarshal(raw, &rs)
	}
	if err != nil {
		panic("config: restart strategy defaults do not decode: " + err.Error())
	}
	return &rs
}

// withDefaults fills a value tree with the `default` tags of the Config
// types, so that the defaults the schema documents are the defaults applied.
func withDefaults(tree any) any {
	return fill(reflect.TypeFor[Config](), tree)
}

func fill(t reflect.Type, v any) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeFor[Component]() {
			return v
		}
		m, ok := v.(map[string]any)
		if !ok {
			return v // the schema check reports the type mismatch
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name := JSONName(f)
			if name == "" {
				continue
			}
			cur, present := m[name]
			if !present {
				if d, ok := f.Tag.Lookup("default"); ok {
					m[name] = parseDefault(f.Type, d)
					continue
				}
				// Absent nested objects get their own defaults.
				if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[Component]() {
					m[name] = fill(f.Type, map[string]any{})
				}
				continue
			}
			m[name] = fill(f.Type, cur)
		}
		return m
	case reflect.Slice:
		s, ok := v.([]any)
		if !ok {
			return v
		}
		for i := range s {
			s[i] = fill(t.Elem(), s[i])
		}
		return s
	}
	return v
}

func parseDefault(t reflect.Type, d string) any {
	switch t.Kind() {
	case reflect.Bool:
		return d == "true"
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil {
			panic("config: bad default tag " + d)
		}
		return float64(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(d, 64)
		if err != nil {
			panic("config: bad default tag " + d)
		}
		return f
	}
	return d
}

// JSONName is the field's name in a configuration document, or "" when the
// field is not part of it.
func JSONName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

func decode(tree any) (*Config, error) {
	b, err := json.Marshal(tree)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

package operator

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/goccy/go-json"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// udfMemoryPages bounds a udf module's linear memory: 2048 pages of 64 KiB
// are 128 MiB.
const udfMemoryPages = 2048

// udfCache holds the machine code of the modules compiled in this
// process, so that the subtasks of a udf operator (and its restarts)
// compile its module once.
var udfCache = wazero.NewCompilationCache()

// udfOp runs each record through a function of a WebAssembly module (the
// ABI is in the package comment). The module runs in wazero with WASI
// preview1 and nothing mounted: no files, no network, no environment,
// a fake clock; a call stops when the task's context ends.
type udfOp struct {
	id, path, fn string

	rt       wazero.Runtime
	compiled wazero.CompiledModule
	mod      api.Module
	alloc    api.Function
	call     api.Function
	stack    [2]uint64
	in       []byte
}

func newUDF(id string, c *job.UDFConfig, fsys sandbox.FS) (*udfOp, error) {
	if c.Function == "" {
		return nil, fmt.Errorf("config.function: required")
	}
	wasm, err := fsys.ReadFile(c.Module)
	if err != nil {
		return nil, fmt.Errorf("config.module: %w", err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithMemoryLimitPages(udfMemoryPages).
		WithCloseOnContextDone(true).
		WithCompilationCache(udfCache))
	cm, err := rt.CompileModule(ctx, wasm)
	if err == nil {
		err = checkExports(cm, c.Function)
	}
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("config.module: %s: %w", c.Module, err)
	}
	return &udfOp{id: id, path: c.Module, fn: c.Function, rt: rt, compiled: cm}, nil
}

// checkExports checks that cm exports alloc(i32) -> i32 and fn(i32, i32) -> i64.
func checkExports(cm wazero.CompiledModule, fn string) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	want := []struct {
		name            string
		params, results []api.ValueType
	}{
		{"alloc", []api.ValueType{i32}, []api.ValueType{i32}},
		{fn, []api.ValueType{i32, i32}, []api.ValueType{i64}},
	}
	exports := cm.ExportedFunctions()
	for _, w := range want {
		d, ok := exports[w.name]
		if !ok {
			return fmt.Errorf("it exports no function %q", w.name)
		}
		if !slices.Equal(d.ParamTypes(), w.params) || !slices.Equal(d.ResultTypes(), w.results) {
			return fmt.Errorf("its function %q is (%s) -> (%s), want (%s) -> (%s)", w.name,
				typeNames(d.ParamTypes()), typeNames(d.ResultTypes()), typeNames(w.params), typeNames(w.results))
		}
	}
	return nil
}

func typeNames(ts []api.ValueType) string {
	var b []byte
	for i, t := range ts {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, api.ValueTypeName(t)...)
	}
	return string(b)
}

// Open instantiates the module (and WASI), then runs its _initialize
// (reactor modules: Go's -buildmode=c-shared, TinyGo, Rust cdylib).
func (o *udfOp) Open(ctx context.Context, _ *Context) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, o.rt); err != nil {
		return fmt.Errorf("operator %s: udf: wasi: %w", o.id, err)
	}
	mod, err := o.rt.InstantiateModule(ctx, o.compiled, wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize"))
	if err != nil {
		return fmt.Errorf("operator %s: udf %s: instantiate: %w", o.id, o.path, err)
	}
	o.mod = mod
	o.alloc = mod.ExportedFunction("alloc")
	o.call = mod.ExportedFunction(o.fn)
	return nil
}

func (o *udfOp) Process(ctx context.Context, in []Record, out Collector) error {
	for i := range in {
		r := &in[i]
		v, err := o.run(ctx, r)
		if err != nil {
			return fmt.Errorf("operator %s: udf %s: %w", o.id, o.fn, err)
		}
		if v != nil {
			out.Emit(Record{Value: v, Time: r.Time})
		}
	}
	return nil
}

// run calls the function on r's JSON and returns the result's JSON, nil
// for null.
func (o *udfOp) run(ctx context.Context, r *Record) ([]byte, error) {
	data, ok := r.Value.([]byte)
	if !ok || !json.Valid(data) {
		var err error
		if o.in, err = json.Marshal(r.Data()); err != nil {
			return nil, fmt.Errorf("encode the record: %w", err)
		}
		data = o.in
	}
	o.stack[0] = api.EncodeI32(int32(len(data)))
	if err := o.alloc.CallWithStack(ctx, o.stack[:]); err != nil {
		return nil, fmt.Errorf("alloc: %w", err)
	}
	ptr := api.DecodeU32(o.stack[0])
	if !o.mod.Memory().Write(ptr, data) {
		return nil, fmt.Errorf("alloc(%d) returned %d, outside the module's memory", len(data), ptr)
	}
	o.stack[0], o.stack[1] = api.EncodeU32(ptr), api.EncodeI32(int32(len(data)))
	if err := o.call.CallWithStack(ctx, o.stack[:]); err != nil {
		return nil, err
	}
	outPtr, outLen := uint32(o.stack[0]>>32), uint32(o.stack[0])
	res, ok := o.mod.Memory().Read(outPtr, outLen)
	if !ok {
		return nil, fmt.Errorf("the result (%d bytes at %d) is outside the module's memory", outLen, outPtr)
	}
	if bytes.Equal(bytes.TrimSpace(res), []byte("null")) {
		return nil, nil
	}
	if !json.Valid(res) {
		return nil, fmt.Errorf("the result is not JSON: %.64q", res)
	}
	return bytes.Clone(res), nil
}

func (o *udfOp) OnWatermark(context.Context, int64, Collector) error { return nil }
func (o *udfOp) Snapshot(context.Context, int64) error               { return nil }
func (o *udfOp) Commit(context.Context, int64) error                 { return nil }

// Close releases the module and its runtime.
func (o *udfOp) Close(ctx context.Context) error {
	return o.rt.Close(ctx)
}

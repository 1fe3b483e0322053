package shm

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
)

// checkType accepts T when its values are plain bytes: booleans, integers,
// floats, complex numbers, and arrays and structs of those. Pointers, slices,
// strings, maps, channels, functions, interfaces and uintptr (an address by
// intent) are refused: their bits mean nothing in another process.
func checkType(t reflect.Type) error {
	if t == nil {
		return fmt.Errorf("nil type: %w", ErrBadType)
	}
	if t.Size() == 0 {
		return fmt.Errorf("type %v has size 0: %w", t, ErrBadType)
	}
	return checkKind(t, t)
}

func checkKind(top, t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return nil
	case reflect.Array:
		return checkKind(top, t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if err := checkKind(top, t.Field(i).Type); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("type %v contains %v (%v): %w", top, t, t.Kind(), ErrBadType)
	}
}

// checkKeyType additionally refuses padding: map keys are hashed and
// compared as bytes, and padding bytes are not guaranteed to be zero.
func checkKeyType(t reflect.Type) error {
	if err := checkType(t); err != nil {
		return err
	}
	if hasPadding(t) {
		return fmt.Errorf("key type %v has padding bytes: %w", t, ErrBadType)
	}
	return nil
}

func hasPadding(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return hasPadding(t.Elem())
	case reflect.Struct:
		var sum uintptr
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if hasPadding(f.Type) {
				return true
			}
			sum += f.Type.Size()
		}
		return sum != t.Size()
	}
	return false
}

// layoutTag hashes the layout of t (kinds, sizes, field offsets; not names),
// so that a process opening a container with a different element layout is
// refused while layout-identical types from different packages interoperate.
func layoutTag(types ...reflect.Type) uint32 {
	h := fnv.New32a()
	for _, t := range types {
		writeLayout(h, t)
	}
	return h.Sum32()
}

func writeLayout(h interface{ Write([]byte) (int, error) }, t reflect.Type) {
	h.Write([]byte(t.Kind().String() + ":" + strconv.FormatUint(uint64(t.Size()), 10) + "{"))
	switch t.Kind() {
	case reflect.Array:
		h.Write([]byte(strconv.Itoa(t.Len()) + "x"))
		writeLayout(h, t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			h.Write([]byte("@" + strconv.FormatUint(uint64(t.Field(i).Offset), 10)))
			writeLayout(h, t.Field(i).Type)
		}
	}
	h.Write([]byte("}"))
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

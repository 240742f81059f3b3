package access

// ReloadForTest reloads f now, as Poll does on its tick.
func ReloadForTest(f *TokenFile) error { return f.reload() }

package bufferpool

// PageTier returns the kind (KindRAM, KindFile) of the tier holding
// resident page i, "" if it is not resident: which tier served a read,
// for the per-file counters of `iowarp trace` (files.FileIO). The page
// may move once it returns. A pool of one tier answers without the lock.
func (b *Bucket) PageTier(i int64) string {
	if len(b.p.tiers) == 1 {
		return b.p.tiers[0].cfg.Kind
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	bl := b.pages[i]
	if b.dead || bl == nil {
		return ""
	}
	return b.p.tiers[bl.tier].cfg.Kind
}

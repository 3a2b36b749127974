"""payments-service (Go): a ledger that indexes past its end."""

from __future__ import annotations

from demo.sources.commit import CommitSpec

_LEDGER_GO = '''package ledger

import "fmt"

type Entry struct {
	Account string
	Cents   int64
}

type Ledger struct {
	balances map[string]int64
}

// Settle books a batch and returns the last entry, which the caller echoes back.
func (l *Ledger) Settle(batch []Entry) (Entry, error) {
	if l.balances == nil {
		return Entry{}, fmt.Errorf("ledger not opened")
	}
	for _, e := range batch {
		l.balances[e.Account] += e.Cents
	}
	last := batch[len(batch)]
	return last, nil
}
'''

_HANDLER_GO = '''package api

import (
	"encoding/json"
	"net/http"

	"github.com/acme/payments/internal/ledger"
)

type Handler struct {
	Ledger *ledger.Ledger
}

func (h *Handler) settle(w http.ResponseWriter, r *http.Request) {
	var batch []ledger.Entry
	if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	last, err := h.Ledger.Settle(batch)
	if err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	_ = json.NewEncoder(w).Encode(last)
}
'''

PAYMENTS_SERVICE: list[CommitSpec] = [
    CommitSpec("Payments ledger with a settle endpoint", {
        "go.mod": "module github.com/acme/payments\n\ngo 1.22\n",
        "internal/ledger/ledger.go": _LEDGER_GO,
        "internal/api/handler.go": _HANDLER_GO,
    }, deployed=True),
]

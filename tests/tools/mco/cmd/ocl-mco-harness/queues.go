package main

// When are the controllers done? A test that polls the cluster can only wait for "nothing changed for
// a while", and must wait longer than any delay a controller may still be sleeping on (the render
// controller's renderDelay after every event, the node controller's update delay). The controllers'
// work queues know: this is a client-go workqueue MetricsProvider (`workqueue.SetProvider`, set before
// the controllers make their queues; the MCO names both queues, render_controller.go and
// node_controller.go `TypedRateLimitingQueueConfig{Name: ...}`), which counts, per queue, the items
// waiting (depth), the items being synced (a Get not yet Done: metrics.go `get`/`done`) and the last
// AddAfter (delaying_queue.go calls `metrics.retry()` on each, the delayed ones included). A queue is
// idle when nothing waits, nothing is synced, and its longest delay has passed since its last AddAfter.
// `GET /queues` on --status-addr serves it as JSON.

import (
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

type queueState struct {
	Depth      int64     `json:"depth"`
	Processing int64     `json:"processing"`
	Adds       int64     `json:"adds"`
	Afters     int64     `json:"afters"`
	LastAfter  time.Time `json:"lastAfter"`
}

type queues struct {
	mu     sync.Mutex
	states map[string]*queueState
	// delays: queue name -> the longest AddAfter delay its controller uses on its normal path
	delays map[string]time.Duration
}

func newQueues(delays map[string]time.Duration) *queues {
	return &queues{states: map[string]*queueState{}, delays: delays}
}

func (q *queues) state(name string) *queueState {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.states[name] == nil {
		q.states[name] = &queueState{}
	}
	return q.states[name]
}

type metric struct {
	q  *queues
	fn func(s *queueState, v float64)
	s  *queueState
}

func (m metric) Inc()              { m.q.mu.Lock(); m.fn(m.s, 1); m.q.mu.Unlock() }
func (m metric) Dec()              { m.q.mu.Lock(); m.fn(m.s, -1); m.q.mu.Unlock() }
func (m metric) Observe(v float64) { m.q.mu.Lock(); m.fn(m.s, v); m.q.mu.Unlock() }
func (m metric) Set(float64)       {}

func (q *queues) metric(name string, fn func(s *queueState, v float64)) metric {
	return metric{q: q, fn: fn, s: q.state(name)}
}

func (q *queues) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.metric(name, func(s *queueState, v float64) { s.Depth += int64(v) })
}
func (q *queues) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.metric(name, func(s *queueState, _ float64) { s.Adds++ })
}

// NewLatencyMetric is observed on each Get (metrics.go `get`): one more item being synced.
func (q *queues) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.metric(name, func(s *queueState, _ float64) { s.Processing++ })
}

// NewWorkDurationMetric is observed on each Done (metrics.go `done`): one item less being synced.
func (q *queues) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.metric(name, func(s *queueState, _ float64) { s.Processing-- })
}
func (q *queues) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.metric(name, func(*queueState, float64) {})
}
func (q *queues) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.metric(name, func(*queueState, float64) {})
}

// NewRetriesMetric is incremented on each AddAfter (delaying_queue.go), AddRateLimited's included.
func (q *queues) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.metric(name, func(s *queueState, _ float64) { s.Afters++; s.LastAfter = time.Now() })
}

type queueReport struct {
	queueState
	Idle bool `json:"idle"`
}

func (q *queues) report(now time.Time) (map[string]queueReport, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out, all := map[string]queueReport{}, len(q.states) == len(q.delays)
	for name, s := range q.states {
		idle := s.Depth == 0 && s.Processing == 0 && now.Sub(s.LastAfter) > q.delays[name]+100*time.Millisecond
		out[name] = queueReport{*s, idle}
		all = all && idle
	}
	return out, all
}

// serve answers GET /queues on addr ("127.0.0.1:0" picks a port) and logs where.
func (q *queues) serve(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/queues", func(w http.ResponseWriter, _ *http.Request) {
		queues, idle := q.report(time.Now())
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"idle": idle, "queues": queues})
	})
	klog.Infof("ocl-mco-harness: queues on http://%s/queues", ln.Addr())
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}

'use strict';
// OpenTelemetry for protected calls: the library's span record made a span of the application's
// tracer, and its measurements recorded with the application's meter.
//
// libwarden assembles the record of each protected call (`warden_trace_span`: the name, the
// times, the attributes, the events, the status, the measurements; docs/TELEMETRY.md); this
// module only translates it. `@opentelemetry/api` is an optional peer dependency: without it, or
// when the application registered no SDK provider (and passed none to `new Warden({tracerProvider,
// meterProvider})`), a protected call asks the library for no record and nothing is traced.
//
// With a tracer, Warden's span is a child of the caller's active span, and the protected function
// runs with Warden's span active (`context.with`), so the spans of its own calls are its children
// (with a context manager registered, as every Node SDK setup does).

const json = require('./json');

let api = null;
try {
  // eslint-disable-next-line global-require
  api = require('@opentelemetry/api');
} catch {
  api = null;
}

const SCOPE = 'warden';

/** Whether `provider` traces: the API's global proxy counts only once an SDK registered under it. */
function traces(provider) {
  if (!provider) return false;
  if (provider instanceof api.ProxyTracerProvider) {
    const noop = new api.ProxyTracerProvider().getDelegate().constructor;
    return !(provider.getDelegate() instanceof noop);
  }
  return true;
}

/** Whether `meter` is a real one (not the API's no-op meter). */
function measures(meter) {
  return Boolean(meter) && !(meter instanceof api.createNoopMeter().constructor);
}

/** A time the record gives in nanoseconds since the epoch (a BigInt past 2^53) as an HrTime. */
function hrTime(nanos) {
  const ns = BigInt(nanos);
  return [Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n)];
}

/** Attributes with any BigInt (a count past 2^53) made a Number, which OpenTelemetry takes. */
function attributes(record) {
  const out = {};
  for (const [key, value] of Object.entries(record)) out[key] = typeof value === 'bigint' ? Number(value) : value;
  return out;
}

/** Telemetry never changes what a protected call does: a failure here is reported and dropped. */
function quiet(what, work) {
  try {
    return work();
  } catch (error) {
    console.warn(`warden: ${what} failed; the action is not affected:`, error);
    return undefined;
  }
}

/** One Warden's tracer and meter: the providers it was given, else the global ones. */
class Telemetry {
  #tracerProvider;
  #meterProvider;
  #version;
  #scopes = new WeakMap();
  #instruments = new WeakMap();

  /** `version` is the package's, the instrumentation scope's version. */
  constructor({ tracerProvider, meterProvider, version }) {
    this.#tracerProvider = tracerProvider ?? null;
    this.#meterProvider = meterProvider ?? null;
    this.#version = version;
  }

  get version() {
    return this.#version;
  }

  /** The meter provider this Warden records to (null without @opentelemetry/api). */
  meterProvider() {
    if (!api) return null;
    return this.#meterProvider ?? api.metrics.getMeterProvider();
  }

  #scope(provider, make) {
    let scope = this.#scopes.get(provider);
    if (!scope) {
      scope = provider[make](SCOPE, this.#version);
      this.#scopes.set(provider, scope);
    }
    return scope;
  }

  /** This call's tracing, made in the caller's context; null when no SDK is configured. */
  begin() {
    if (!api) return null;
    const tracerProvider = this.#tracerProvider ?? api.trace.getTracerProvider();
    const tracer = traces(tracerProvider) ? this.#scope(tracerProvider, 'getTracer') : null;
    const meterProvider = this.meterProvider();
    const meter = meterProvider ? this.#scope(meterProvider, 'getMeter') : null;
    const measuring = measures(meter);
    if (!tracer && !measuring) return null;
    return new Call(this, tracer, measuring ? meter : null, api.context.active());
  }

  instrument(meter, measurement) {
    let made = this.#instruments.get(meter);
    if (!made) {
      made = new Map();
      this.#instruments.set(meter, made);
    }
    let instrument = made.get(measurement.name);
    if (!instrument) {
      const options = { unit: measurement.unit, description: measurement.description };
      instrument =
        measurement.instrument === 'counter'
          ? meter.createCounter(measurement.name, options)
          : meter.createHistogram(measurement.name, options);
      made.set(measurement.name, instrument);
    }
    return instrument;
  }
}

/** One protected call's tracing: the tracer and meter, and the caller's context. */
class Call {
  constructor(telemetry, tracer, meter, parent) {
    this.telemetry = telemetry;
    this.tracer = tracer;
    this.meter = meter;
    this.parent = parent;
  }

  /** The caller's W3C trace context (`traceparent`), which the call's receipts record. */
  traceparent() {
    const context = api.trace.getSpanContext(this.parent);
    if (!context || !api.isSpanContextValid(context)) return null;
    const flags = (context.traceFlags & 0xff).toString(16).padStart(2, '0');
    return `00-${context.traceId}-${context.spanId}-${flags}`;
  }

  /** A span started as the record says, a child of the caller's; null without a tracer. */
  started(record) {
    if (!this.tracer) return null;
    return this.tracer.startSpan(
      record.name,
      { kind: api.SpanKind.INTERNAL, attributes: attributes(record.attributes), startTime: hrTime(record.start_time_unix_nano) },
      this.parent,
    );
  }

  /** `span` (or a new one, for a call that got no permit) given the ended record's attributes
   * (those not `setAlready` at its start), events and status, and ended at its time; its
   * measurements recorded. */
  ended(span, record, setAlready = {}) {
    const ending = span ?? this.started(record);
    if (ending) {
      const known = span ? setAlready : attributes(record.attributes);
      const changed = Object.entries(attributes(record.attributes)).filter(([key, value]) => known[key] !== value);
      if (changed.length > 0) ending.setAttributes(Object.fromEntries(changed));
      for (const event of record.events) {
        ending.addEvent(event.name, attributes(event.attributes), hrTime(event.time_unix_nano));
      }
      if (record.status.code === 'error') {
        ending.setStatus({ code: api.SpanStatusCode.ERROR, message: record.status.description });
      }
      ending.end(hrTime(record.end_time_unix_nano));
    }
    if (this.meter) {
      for (const measurement of record.metrics) {
        const instrument = this.telemetry.instrument(this.meter, measurement);
        const value = Number(measurement.value);
        if (measurement.instrument === 'counter') instrument.add(value, attributes(measurement.attributes));
        else instrument.record(value, attributes(measurement.attributes));
      }
    }
  }
}

/** The span of a protected call that got a permit: started from the record when the permit was
 * issued, ended from it once the permit reported its outcome (or was released). */
class Traced {
  #call;
  #trace;
  #span = null;
  #started = {};
  #ended = false;

  constructor(call, trace) {
    this.#call = call;
    this.#trace = trace;
    this.#span =
      quiet('starting the span', () => {
        const record = json.parse(trace.span());
        this.#started = attributes(record.attributes);
        return call.started(record);
      }) ?? null;
  }

  /** `fn()` with Warden's span active: the protected function's own spans are its children. */
  run(fn) {
    if (!this.#span) return fn();
    return api.context.with(api.trace.setSpan(this.#call.parent, this.#span), fn);
  }

  /** End the span from the record, once the library says the call ended (idempotent). */
  end() {
    if (this.#ended) return;
    quiet('ending the span', () => {
      const record = json.parse(this.#trace.span());
      if (record.end_time_unix_nano === null) return;
      this.#ended = true;
      this.#call.ended(this.#span, record, this.#started);
    });
  }
}

/** The span of a call that ended without a permit (a refusal or a fault). */
function refused(call, trace) {
  quiet("recording the refusal's span", () => {
    const record = json.parse(trace.span());
    if (record.end_time_unix_nano !== null) call.ended(null, record);
  });
}

/**
 * Observable gauges read from the store behind `handle` each time the meter collects: the names
 * `warden_gauges_describe` lists. Returns the names registered; a closed handle observes nothing.
 */
function registerGauges(native, handle, meterProvider, version) {
  if (!api) throw new Error('registerGauges needs @opentelemetry/api: npm install @opentelemetry/api');
  const meter = meterProvider.getMeter(SCOPE, version);
  const described = json.parse(native.gaugesDescribe());
  for (const gauge of described) {
    const observable = meter.createObservableGauge(gauge.name, { unit: gauge.unit, description: gauge.description });
    observable.addCallback(async (result) => {
      if (handle.closed) return;
      let points;
      try {
        points = json.parse(await handle.gaugeRead(gauge.name));
      } catch (error) {
        console.warn(`warden: reading the gauge ${gauge.name} failed:`, error);
        return;
      }
      for (const point of points) result.observe(Number(point.value), attributes(point.attributes));
    });
  }
  return described.map((gauge) => gauge.name);
}

module.exports = { Telemetry, Traced, refused, registerGauges, available: () => api !== null };

"""What a reconnecting browser brings along (ui/state.py reads it on a session's first run)."""

from __future__ import annotations

from streamlit.runtime.scriptrunner import get_script_run_ctx


def browser_text(key: str) -> str | None:
    """The text the browser sent for the text widget `key` before this session drew it, or None.

    A browser whose server process died reconnects to another one: a new session, whose first run gets
    the URL (as the last run wrote it) and the widgets' values (what the user typed since, e.g. the
    sentence whose Enter met the dead process). Streamlit has no public API for the second; widget ids
    end with their key. Any surprise (a new Streamlit) gives None: the URL's value, as before."""
    try:
        states = get_script_run_ctx().session_state._state._new_widget_state.states
        for wid, item in states.items():
            proto = getattr(item, "value", None)
            if wid.endswith(f"-{key}") and getattr(proto, "WhichOneof", None) and proto.WhichOneof("value") == \
                    "string_value":
                return str(proto.string_value)
    except Exception:  # noqa: BLE001 - private structures: never fail the run over them
        return None
    return None

"""Glass Transformer: page config, navigation in sections, and the shared sidebar.

Run with `streamlit run app.py` (or `./dev.sh app`, which sets up the venv first). The page list is
plain data in ui/page_list.py; the navigation is built in ui/shell.py. Each page in pages/ also runs
on its own.

`streamlit run app.py` first imports this file as a module and finds `app`, the web server: Streamlit's own
(`st.App`) with the classroom's event stream as one more route and its hub in the server's lifespan
(ui/classroom/push.py). It then runs this file as the script of every page (`__name__ == "__main__"`).
"""

import streamlit as st

if __name__ != "__main__":  # imported by `streamlit run app.py` (or an ASGI server): the web server
    import importlib
    import logging
    import threading

    from ui import fragment_page, session_info
    from ui.classroom import push

    session_info.limit_connections()  # a request's head has 10 s; the open-file limit is the hard one
    fragment_page.install()  # a fragment's run: the session's page and address, its own widgets (ui/fragment_page.py)

    # The first page's imports (torch, pandas, plotly: ui/startup.py; then the app's own modules) begin now, beside
    # the server's own start, instead of when the first visitor's page runs: that run finds them done (or waits
    # for the rest on Python's import locks); then the shipped model and the default sentence's analysis
    # (ui/models.py warm_up). Neither draws anything or needs a script run.
    def _warm_up() -> None:
        for name in ("ui.startup", "ui.shell", "ui.sidebar", "ui.classroom.panels", "ui.training.session"):
            importlib.import_module(name)
        try:
            importlib.import_module("ui.models").warm_up()
        except Exception:  # noqa: BLE001 - the first visitor's run loads them instead (and shows what failed)
            logging.getLogger("glass").exception("warm-up: the shipped model could not be prepared")

    threading.Thread(target=_warm_up, name="glass-warm-up", daemon=True).start()

    # the middleware: a client over its share of the server (many tabs, many clicks) waits; the others never do
    app = st.App("app.py", routes=push.routes(), lifespan=push.lifespan, middleware=session_info.middleware())
else:  # a run of the app's script
    import ui.startup  # noqa: F401, I001 - first: per-process settings before torch loads

    from ui import shell, style
    from ui.style import presenter_asked
    from ui.classroom import panels as classroom
    from ui.page_list import ICON
    from ui.session_info import fair_share
    from ui.sidebar import render_sidebar
    from ui.state import init_state, keep_widget_state
    from ui.study import session as study
    from ui.training.session import attach as attach_training_run

    # the icon is ours, served by the app: a Material icon here was fetched from fonts.gstatic.com (not offline)
    st.set_page_config(page_title="Glass Transformer", page_icon=str(ICON), layout="wide")

    # in its turn (a teacher's run first), and its CPU counted against its client's share (serving/fair_share.py)
    with fair_share(lead=classroom.is_teacher()):
        # a teacher's projector in presenter mode: the pages in a bar on top, the class's controls first in the sidebar
        page = shell.navigation(top=presenter_asked() and classroom.presents())
        if shell.admitted():
            keep_widget_state()
            init_state()  # the session's state (from a shared link on its first run), presenter mode included
            style.inject()  # the app's stylesheet (ui/style.py): contrast, formulas, phones, presenter mode
            attach_training_run(page.url_path)  # a reload on any page keeps this browser's run and its model
            study.on_run(page)  # a study's participant: what they view and change is logged (ui/study/session.py)
            classroom.run(page, render_sidebar)  # follow a class / lead one

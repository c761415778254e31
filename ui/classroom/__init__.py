"""Classroom mode in the Streamlit app: a session's class (session.py), its drawing (panels.py), questions (asking.py).

The class store itself is the `classroom` package (no Streamlit).
"""

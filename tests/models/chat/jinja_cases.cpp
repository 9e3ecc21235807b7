#include "tests/models/chat/jinja_cases.hpp"

namespace troupe::jinja::testing {

using nlohmann::json;

std::vector<render_case> feature_cases() {
  const json people = {{"people",
                        {{{"name", "Ann"}, {"age", 31}, {"admin", true}},
                         {{"name", "bob"}, {"age", 7}, {"admin", false}},
                         {{"name", "Cy"}, {"age", 19}, {"admin", nullptr}}}},
                       {"s", "  Hello, World!  "},
                       {"n", 7},
                       {"f", 2.5},
                       {"empty", json::array()},
                       {"d", {{"b", 2}, {"a", 1}, {"c", {1, 2, {{"x", "y"}}}}}},
                       {"u", "naïve café ÜBER 中文"}};
  std::vector<render_case> c = {
      // Whitespace: trim_blocks, lstrip_blocks, '-' and '+'.
      {"text", "plain text\nwith lines\n", people},
      {"trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", people},
      {"lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc", people},
      {"lstrip_after_text", "a  {% if true %}b{% endif %}  c", people},
      {"minus_left_right", "a  \n  {%- if true -%}  \n b  {%- endif %}\n\nc", people},
      {"minus_vars", "x  {{- n -}}  y\n{{ n }}  \n", people},
      {"plus_keeps", "a\n    {%+ if true %}b{% endif %}", people},
      {"comment", "a {# a comment #} b\n  {# own line #}\nc {#- strip -#}  d", people},
      {"raw", "{% raw %}{{ not evaluated }}{% endraw %} and {{ n }}", people},
      {"crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", people},
      {"line_separators",
       "a\rb\x0b"
       "c\u2028d {{ 'x\u2029y' }}\n\n",
       people},
      // Literals and printing.
      {"literals",
       "{{ 1 }} {{ -2 }} {{ 3.0 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 'a' \"b\" }} {{ true }} {{ none }} "
       "{{ [1, 'x', none] }} {{ {'k': [1.5, false]} }}",
       people},
      {"string_escapes",
       "{{ 'tab\\there' }}|{{ \"q\\\"uote\" }}|{{ 'new\\nline' }}|{{ '\\u00e9\\x41' }}", people},
      {"repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }}", people},
      {"float_repr",
       "{{ 1/3 }} {{ 10/4 }} {{ 2**0.5 }} {{ 1e16 }} {{ 1e-5 }} {{ 123456789.0 }} {{ -0.0 }} {{ f "
       "* 2 }}",
       people},
      // Operators.
      {"arithmetic",
       "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ n - 10 }} "
       "{{ 'ab' * 3 }} {{ [1] * 2 }}",
       people},
      {"powers",
       "{{ (-1) ** 3 }} {{ (-1) ** 4 }} {{ 0 ** 0 }} {{ 0 ** 5 }} {{ 1 ** 99 }} {{ 3 ** 4 }} {{ 2 "
       "** -1 }} {{ 2.0 ** 3 }}",
       people},
      {"concat", "{{ 'a' ~ 1 ~ none ~ true }} {{ 'x' + 'y' }} {{ [1] + [2, 3] }}", people},
      {"comparisons",
       "{{ 1 < 2 }} {{ 'b' > 'a' }} {{ 1 == 1.0 }} {{ 'a' != 'a' }} {{ 2 >= 2 }} {{ [1,2] == [1,2] "
       "}}",
       people},
      {"in", "{{ 'ell' in 'hello' }} {{ 3 in [1,2] }} {{ 'a' in {'a': 1} }} {{ 'z' not in 'abc' }}",
       people},
      {"logic",
       "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not 0 }} {{ none or [] or 'last' }} {{ '' and 'z' }}",
       people},
      {"conditional_expr",
       "{{ 'yes' if n > 3 else 'no' }} [{{ 'x' if false }}] {{ 'a' if n < 3 else 'b' if n < 10 "
       "else 'c' }}",
       people},
      {"precedence",
       "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 * 3 ~ 4 }} {{ not 1 == 2 }}", people},
      // Access.
      {"attributes",
       "{{ people[0].name }} {{ people[1]['age'] }} {{ d.a }} {{ d['c'][2].x }} [{{ d.missing }}]",
       people},
      {"negative_index", "{{ people[-1].name }} {{ 'hello'[1] }} {{ 'hello'[-1] }} {{ u[1] }}",
       people},
      {"slices",
       "{{ [1,2,3,4][1:] }} {{ [1,2,3,4][:2] }} {{ [1,2,3,4][::-1] }} {{ 'hello'[1:3] }} {{ "
       "'hello'[::2] }} {{ u[::-1] }} {{ [1,2,3][-2:] }} {{ [1,2,3][5:] }}",
       people},
      {"dict_methods",
       "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.keys() | list }} {{ "
       "d.values() | list }} {{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }}",
       people},
      // String methods.
      {"strip",
       "[{{ s.strip() }}] [{{ s.lstrip() }}] [{{ s.rstrip() }}] [{{ 'xxhixx'.strip('x') }}] [{{ "
       "'\\n\\nhi\\n'.lstrip('\\n') }}]",
       people},
      {"split",
       "{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ "
       "'a<think>b</think>c'.split('</think>')[-1] }}",
       people},
      {"startswith",
       "{{ s.strip().startswith('Hello') }} {{ 'x.py'.endswith(('.py', '.txt')) }} {{ "
       "'abc'.startswith('b') }}",
       people},
      {"case",
       "{{ u.upper() }} {{ u.lower() }} {{ 'hello wORLD'.title() }} {{ 'hELLO'.capitalize() }}",
       people},
      {"replace_find",
       "{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'hello'.find('l') }} {{ "
       "'hello'.count('l') }} {{ '-'.join(['a', 'b']) }}",
       people},
      // Filters.
      {"trim_length",
       "[{{ s | trim }}] {{ s | length }} {{ people | length }} {{ u | length }} {{ d | count }}",
       people},
      {"tojson",
       "{{ d | tojson }} {{ people[0] | tojson }} {{ 'é \"q\" \\n' | tojson }} {{ [1.0, 2, none, "
       "true] | tojson }}",
       people},
      {"tojson_indent",
       "{{ d | tojson(indent=2) }}\n{{ people | tojson(indent=4) }}\n{{ empty | tojson(indent=2) "
       "}}",
       people},
      {"tojson_options", "{{ d | tojson(sort_keys=true) }} {{ d | tojson(separators=(',', ':')) }}",
       people},
      {"string_filters",
       "{{ 'hi' | upper }} {{ 'HI' | lower }} {{ 'a b' | title }} {{ 'ab' | capitalize }} {{ 'aXa' "
       "| replace('a', '-') }} {{ n | string }} {{ '<&>' | e }}",
       people},
      {"default",
       "{{ missing | default('x') }} {{ '' | default('y') }} {{ '' | default('z', true) }} {{ "
       "missing | d('w') }}",
       people},
      {"first_last_list",
       "{{ people | first }} {{ (people | last).name }} {{ 'abc' | list }} {{ d | list }} {{ "
       "[3,1,2] | reverse | list }}",
       people},
      {"join_map",
       "{{ people | map(attribute='name') | join(', ') }} {{ [1,2] | join }} {{ people | join(';', "
       "attribute='age') }} {{ ['a','b'] | map('upper') | list }}",
       people},
      {"select",
       "{{ people | selectattr('admin') | map(attribute='name') | list }} {{ people | "
       "rejectattr('admin') | list | length }} {{ [1,2,3,4] | select('even') | list }} {{ [1,2,3] "
       "| reject('odd') | list }} {{ people | selectattr('age', 'gt', 10) | list | length }} {{ "
       "people | selectattr('name', 'equalto', 'bob') | list | length }}",
       people},
      {"numbers",
       "{{ '42' | int }} {{ 'x' | int }} {{ 3.9 | int }} {{ '2.5' | float }} {{ -3 | abs }} {{ "
       "[1,2,3] | sum }} {{ [3,1,2] | min }} {{ [3,1,2] | max }} {{ [3,1,2,1] | unique | list }} "
       "{{ [3,1,2] | sort }} {{ people | sort(attribute='age') | map(attribute='name') | list }}",
       people},
      {"items_filter", "{% for k, v in d | items %}{{ k }}:{{ v }} {% endfor %}", people},
      {"indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(4, true) }}", people},
      // Tests.
      {"tests",
       "{{ n is defined }} {{ zz is defined }} {{ zz is undefined }} {{ none is none }} {{ n is "
       "number }} {{ n is integer }} {{ f is float }} {{ s is string }} {{ d is mapping }} {{ "
       "people is iterable }} {{ s is iterable }} {{ n is even }} {{ n is odd }} {{ 9 is "
       "divisibleby 3 }} {{ true is boolean }} {{ false is false }} {{ 1 is true }} {{ people is "
       "sequence }}",
       people},
      {"test_not",
       "{{ n is not none }} {{ people[2].admin is not none }} {{ not zz is defined }} {{ n is not "
       "string }}",
       people},
      {"test_compare",
       "{{ n is eq 7 }} {{ n is ne 7 }} {{ n is gt 3 }} {{ n is lt(3) }} {{ 'a' is in 'abc' }} {{ "
       "'x' is lower }} {{ 'X' is upper }} {{ none is sameas none }}",
       people},
      // Loops.
      {"loop_vars",
       "{% for p in people %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first "
       "}}/{{ loop.last }}/{{ loop.length }} {% endfor %}",
       people},
      {"loop_prev_next",
       "{% for x in [1,2,3] %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('a','b') "
       "}}]{% endfor %}",
       people},
      {"loop_else",
       "{% for x in empty %}x{% else %}none{% endfor %} {% for x in [1] %}{{ x }}{% else %}never{% "
       "endfor %}",
       people},
      {"loop_filter",
       "{% for p in people if p.age > 10 %}{{ p.name }}{{ loop.length }}{% endfor %}", people},
      {"loop_unpack", "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}", people},
      {"loop_dict_string",
       "{% for k in d %}{{ k }}{% endfor %} {% for c in 'héllo' %}{{ c }}.{% endfor %}", people},
      {"loop_controls",
       "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 5 %}{% break "
       "%}{% endif %}{{ x }}{% endfor %}",
       people},
      {"range", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }}",
       people},
      {"nested_loops",
       "{% for p in people %}{% for q in people %}{% if loop.index0 == 0 %}{{ p.name }}:{% endif "
       "%}{{ loop.index }}{% endfor %};{% endfor %}",
       people},
      {"reversed_messages",
       "{% for p in people[::-1] %}{{ (people | length - 1) - loop.index0 }}{{ p.name }} {% endfor "
       "%}",
       people},
      // Scoping.
      {"set", "{% set x = 1 %}{% set y = x + 1 %}{{ x }}{{ y }}{% set x = 'z' %}{{ x }}", people},
      {"set_in_loop",
       "{% set x = 'out' %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }};{% endfor %}{{ x }}",
       people},
      {"set_in_if", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}", people},
      {"namespace",
       "{% set ns = namespace(count=0, names='') %}{% for p in people %}{% set ns.count = ns.count "
       "+ p.age %}{% set ns.names = ns.names + p.name %}{% endfor %}{{ ns.count }} {{ ns.names }}",
       people},
      {"block_set", "{% set block %}a{{ n }}b{% endset %}[{{ block }}]", people},
      // Macros.
      {"macro",
       "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} "
       "{{ greet('Bo', '?') }} {{ greet(name='Cy', punct='.') }}",
       people},
      {"macro_outer",
       "{% set top = 'T' %}{% macro m(x) %}{{ top }}{{ x }}{{ n }}{% endmacro %}{{ m(1) }}",
       people},
      {"macro_loop",
       "{% macro row(p) -%}\n  {{ p.name }}={{ p.age }}\n{%- endmacro %}\n{% for p in people %}{{ "
       "row(p) }}\n{% endfor %}",
       people},
      // Globals and undefined behaviour.
      {"undefined_prints_empty", "[{{ nothing }}] [{{ people[0].nothing }}] [{{ people[9] }}]",
       people},
      {"undefined_truthiness",
       "{% if nothing %}yes{% else %}no{% endif %} {{ nothing is none }} {{ nothing == none }}",
       people},
      {"none_attribute", "{{ none.attr is defined }}", people},
      {"raise", "{{ raise_exception('roles must alternate') }}", people},
      {"raise_conditional", "{% if n > 3 %}{{ raise_exception('too many: ' ~ n) }}{% endif %}ok",
       people},
      {"error_undefined_attribute", "{{ nothing.attr }}", people},
      {"error_type", "{{ 1 + 'a' }}", people},
      {"error_unknown_filter", "{{ n | no_such_filter }}", people},
      {"error_syntax", "{% if %}", people},
      {"error_unclosed", "{% for x in people %}", people},
      {"dict_literal_loop",
       "{% for k, v in {'x': 1, 'y': [2]}.items() %}{{ k }}{{ v }}{% endfor %}", people},
      {"filter_precedence", "{{ people | length - 1 }} {{ -1 | abs }} {{ 'a' ~ 'b' | upper }}",
       people},
      {"unicode_text", "Übersetzung: {{ u }} — ✓ 🙂\n", people},
  };
  return c;
}

std::vector<std::pair<std::string, json>> conversations() {
  const json weather_tool = {{"type", "function"},
                             {"function",
                              {{"name", "get_weather"},
                               {"description", "Get the weather in a city"},
                               {"parameters",
                                {{"type", "object"},
                                 {"properties",
                                  {{"city", {{"type", "string"}, {"description", "the city"}}},
                                   {"unit", {{"type", "string"}, {"enum", {"c", "f"}}}}}},
                                 {"required", {"city"}}}}}}};
  return {
      {"user_only", {{"messages", {{{"role", "user"}, {"content", "Hello!"}}}}}},
      {"system_user",
       {{"messages",
         {{{"role", "system"}, {"content", "You are terse."}},
          {{"role", "user"}, {"content", "  What is 2+2?  "}}}}}},
      {"multi_turn",
       {{"messages",
         {{{"role", "user"}, {"content", "Hi"}},
          {{"role", "assistant"}, {"content", "Hello! How can I help?"}},
          {{"role", "user"}, {"content", "Tell me a joke.\nA short one."}}}}}},
      {"multi_turn_system",
       {{"messages",
         {{{"role", "system"}, {"content", "Be kind."}},
          {{"role", "user"}, {"content", "Hi"}},
          {{"role", "assistant"}, {"content", "Hey."}},
          {{"role", "user"}, {"content", "Bye"}},
          {{"role", "assistant"}, {"content", "Goodbye!"}}}}}},
      {"thinking_history",
       {{"messages",
         {{{"role", "user"}, {"content", "2+3?"}},
          {{"role", "assistant"}, {"content", "<think>\nadd them\n</think>\n\n5"}},
          {{"role", "user"}, {"content", "and 4+4?"}}}}}},
      {"reasoning_content",
       {{"messages",
         {{{"role", "user"}, {"content", "q"}},
          {{"role", "assistant"}, {"content", "a"}, {"reasoning_content", "thought"}}}}}},
      {"tools_call",
       {{"messages",
         {{{"role", "system"}, {"content", "Use tools."}},
          {{"role", "user"}, {"content", "Weather in Paris?"}},
          {{"role", "assistant"},
           {"content", nullptr},
           {"tool_calls",
            {{{"type", "function"},
              {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
          {{"role", "tool"}, {"content", "{\"temp\": 21}"}},
          {{"role", "assistant"}, {"content", "It is 21 °C in Paris."}}}},
        {"tools", {weather_tool}}}},
      {"tools_dict_arguments",
       {{"messages",
         {{{"role", "user"}, {"content", "Weather in Oslo and Rome?"}},
          {{"role", "assistant"},
           {"content", ""},
           {"tool_calls",
            {{{"type", "function"},
              {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Oslo"}}}}}},
             {{"type", "function"},
              {"function",
               {{"name", "get_weather"}, {"arguments", {{"city", "Rome"}, {"unit", "c"}}}}}}}}},
          {{"role", "tool"}, {"content", "cold"}},
          {{"role", "tool"}, {"content", "warm"}}}},
        {"tools", {weather_tool}}}},
      {"tools_no_system",
       {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"tools", {weather_tool}}}},
      {"unicode",
       {{"messages",
         {{{"role", "user"},
           {"content", "日本語で答えて 🙂 \"quotes\" and 'apostrophes'"}},
          {{"role", "assistant"}, {"content", "はい。"}}}}}},
      {"alternation_broken",
       {{"messages",
         {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}}}}},
      {"empty_content", {{"messages", {{{"role", "user"}, {"content", ""}}}}}},
  };
}

}  // namespace troupe::jinja::testing

"""The .proto files a PROTOBUF schema may import without a reference.

Serializers treat these as built in (confluent-kafka's ``_is_builtin``: ``google/protobuf/``,
``google/type/`` and ``confluent/``): with ``skip.known.types`` (its default) it imports them
but sends no reference, and every reader has them compiled in. So the registry must resolve
them itself. Only their declarations matter here (names, fields, numbers, types), enough to
resolve and compare types, so comments and most options are left out; ``descriptor.proto`` is
reduced to its option messages and their extension ranges, which is what schemas import it for
(custom options). tests/unit/test_sr_protobuf_compatibility.py checks each against the
descriptors the ``protobuf`` and ``googleapis-common-protos`` packages ship.
"""

from __future__ import annotations

_WRAPPERS = "".join(
    f"message {name} {{ {kind} value = 1; }}\n"
    for name, kind in (("DoubleValue", "double"), ("FloatValue", "float"), ("Int64Value", "int64"),
                       ("UInt64Value", "uint64"), ("Int32Value", "int32"), ("UInt32Value", "uint32"),
                       ("BoolValue", "bool"), ("StringValue", "string"), ("BytesValue", "bytes")))

_FIELD_KINDS = " ".join(
    f"TYPE_{kind} = {number};" for number, kind in enumerate(
        ("UNKNOWN", "DOUBLE", "FLOAT", "INT64", "UINT64", "INT32", "FIXED64", "FIXED32", "BOOL",
         "STRING", "GROUP", "MESSAGE", "BYTES", "UINT32", "ENUM", "SFIXED32", "SFIXED64", "SINT32",
         "SINT64")))

_DESCRIPTOR_MESSAGES = "".join(
    f"message {name} {{ extensions 1000 to max; }}\n"
    for name in ("FileOptions", "MessageOptions", "FieldOptions", "OneofOptions", "EnumOptions",
                 "EnumValueOptions", "ServiceOptions", "MethodOptions", "ExtensionRangeOptions",
                 "FeatureSet")) + "".join(
    f"message {name} {{}}\n"
    for name in ("FileDescriptorSet", "FileDescriptorProto", "DescriptorProto", "FieldDescriptorProto",
                 "OneofDescriptorProto", "EnumDescriptorProto", "EnumValueDescriptorProto",
                 "ServiceDescriptorProto", "MethodDescriptorProto", "UninterpretedOption",
                 "SourceCodeInfo", "GeneratedCodeInfo", "FeatureSetDefaults"))

_GOOGLE_PROTOBUF = {
    "any": 'message Any { string type_url = 1; bytes value = 2; }',
    "duration": 'message Duration { int64 seconds = 1; int32 nanos = 2; }',
    "timestamp": 'message Timestamp { int64 seconds = 1; int32 nanos = 2; }',
    "empty": 'message Empty {}',
    "field_mask": 'message FieldMask { repeated string paths = 1; }',
    "source_context": 'message SourceContext { string file_name = 1; }',
    "struct": """
        message Struct { map<string, Value> fields = 1; }
        message Value {
          oneof kind {
            NullValue null_value = 1; double number_value = 2; string string_value = 3;
            bool bool_value = 4; Struct struct_value = 5; ListValue list_value = 6;
          }
        }
        enum NullValue { NULL_VALUE = 0; }
        message ListValue { repeated Value values = 1; }""",
    "wrappers": _WRAPPERS,
    "type": f"""
        import "google/protobuf/any.proto";
        import "google/protobuf/source_context.proto";
        message Type {{
          string name = 1; repeated Field fields = 2; repeated string oneofs = 3;
          repeated Option options = 4; SourceContext source_context = 5; Syntax syntax = 6;
          string edition = 7;
        }}
        message Field {{
          enum Kind {{ {_FIELD_KINDS} }}
          enum Cardinality {{
            CARDINALITY_UNKNOWN = 0; CARDINALITY_OPTIONAL = 1; CARDINALITY_REQUIRED = 2;
            CARDINALITY_REPEATED = 3;
          }}
          Kind kind = 1; Cardinality cardinality = 2; int32 number = 3; string name = 4;
          string type_url = 6; int32 oneof_index = 7; bool packed = 8; repeated Option options = 9;
          string json_name = 10; string default_value = 11;
        }}
        message Enum {{
          string name = 1; repeated EnumValue enumvalue = 2; repeated Option options = 3;
          SourceContext source_context = 4; Syntax syntax = 5; string edition = 6;
        }}
        message EnumValue {{ string name = 1; int32 number = 2; repeated Option options = 3; }}
        message Option {{ string name = 1; Any value = 2; }}
        enum Syntax {{ SYNTAX_PROTO2 = 0; SYNTAX_PROTO3 = 1; SYNTAX_EDITIONS = 2; }}""",
    "api": """
        import "google/protobuf/source_context.proto";
        import "google/protobuf/type.proto";
        message Api {
          string name = 1; repeated Method methods = 2; repeated Option options = 3;
          string version = 4; SourceContext source_context = 5; repeated Mixin mixins = 6;
          Syntax syntax = 7; string edition = 8;
        }
        message Method {
          string name = 1; string request_type_url = 2; bool request_streaming = 3;
          string response_type_url = 4; bool response_streaming = 5; repeated Option options = 6;
          Syntax syntax = 7; string edition = 8;
        }
        message Mixin { string name = 1; string root = 2; }""",
}

_GOOGLE_TYPE = {
    "date": "message Date { int32 year = 1; int32 month = 2; int32 day = 3; }",
    "money": "message Money { string currency_code = 1; int64 units = 2; int32 nanos = 3; }",
    "latlng": "message LatLng { double latitude = 1; double longitude = 2; }",
    "timeofday": "message TimeOfDay { int32 hours = 1; int32 minutes = 2; int32 seconds = 3; int32 nanos = 4; }",
    "dayofweek": "enum DayOfWeek { DAY_OF_WEEK_UNSPECIFIED = 0; " + " ".join(
        f"{day} = {number};" for number, day in enumerate(
            ("MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY"), 1)) + " }",
    "month": "enum Month { MONTH_UNSPECIFIED = 0; " + " ".join(
        f"{month} = {number};" for number, month in enumerate(
            ("JANUARY", "FEBRUARY", "MARCH", "APRIL", "MAY", "JUNE", "JULY", "AUGUST", "SEPTEMBER",
             "OCTOBER", "NOVEMBER", "DECEMBER"), 1)) + " }",
    "calendar_period": "enum CalendarPeriod { CALENDAR_PERIOD_UNSPECIFIED = 0; DAY = 1; WEEK = 2; "
                       "FORTNIGHT = 3; MONTH = 4; QUARTER = 5; HALF = 6; YEAR = 7; }",
    "color": 'import "google/protobuf/wrappers.proto";\n'
             "message Color { float red = 1; float green = 2; float blue = 3; "
             "google.protobuf.FloatValue alpha = 4; }",
    "fraction": "message Fraction { int64 numerator = 1; int64 denominator = 2; }",
    "quaternion": "message Quaternion { double x = 1; double y = 2; double z = 3; double w = 4; }",
    "expr": "message Expr { string expression = 1; string title = 2; string description = 3; string location = 4; }",
    "decimal": "message Decimal { string value = 1; }",
    "localized_text": "message LocalizedText { string text = 1; string language_code = 2; }",
    "interval": 'import "google/protobuf/timestamp.proto";\n'
                "message Interval { google.protobuf.Timestamp start_time = 1; "
                "google.protobuf.Timestamp end_time = 2; }",
    "phone_number": """
        message PhoneNumber {
          message ShortCode { string region_code = 1; string number = 2; }
          oneof kind { string e164_number = 1; ShortCode short_code = 2; }
          string extension = 3;
        }""",
    "postal_address": """
        message PostalAddress {
          int32 revision = 1; string region_code = 2; string language_code = 3;
          string postal_code = 4; string sorting_code = 5; string administrative_area = 6;
          string locality = 7; string sublocality = 8; repeated string address_lines = 9;
          repeated string recipients = 10; string organization = 11;
        }""",
    "datetime": """
        import "google/protobuf/duration.proto";
        message DateTime {
          int32 year = 1; int32 month = 2; int32 day = 3; int32 hours = 4; int32 minutes = 5;
          int32 seconds = 6; int32 nanos = 7;
          oneof time_offset { google.protobuf.Duration utc_offset = 8; TimeZone time_zone = 9; }
        }
        message TimeZone { string id = 1; string version = 2; }""",
}

_META_EXTENSIONS = "".join(
    f"extend google.protobuf.{options} {{ Meta {name} = 1088; }}\n"
    for options, name in (("FileOptions", "file_meta"), ("MessageOptions", "message_meta"),
                          ("FieldOptions", "field_meta"), ("EnumOptions", "enum_meta"),
                          ("EnumValueOptions", "enum_value_meta")))


def _known() -> dict[str, str]:
    files = {f"google/protobuf/{name}.proto": f'syntax = "proto3";\npackage google.protobuf;\n{body}\n'
             for name, body in _GOOGLE_PROTOBUF.items()}
    files["google/protobuf/descriptor.proto"] = (
        f'syntax = "proto2";\npackage google.protobuf;\n{_DESCRIPTOR_MESSAGES}')
    files.update({f"google/type/{name}.proto": f'syntax = "proto3";\npackage google.type;\n{body}\n'
                  for name, body in _GOOGLE_TYPE.items()})
    files["confluent/meta.proto"] = (
        'syntax = "proto3";\npackage confluent;\nimport "google/protobuf/descriptor.proto";\n'
        "message Meta { string doc = 1; map<string, string> params = 2; repeated string tags = 3; "
        "repeated Rule rules = 4; }\n"
        "message Rule { string name = 1; string doc = 2; string expr = 3; string sql = 4; }\n"
        + _META_EXTENSIONS)
    files["confluent/type/decimal.proto"] = (
        'syntax = "proto3";\npackage confluent.type;\n'
        "message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }\n")
    return files


#: import path -> .proto text, for every file importable without a reference.
KNOWN_FILES: dict[str, str] = _known()
